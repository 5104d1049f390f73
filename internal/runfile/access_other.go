//go:build !unix

package runfile

import "os"

// OpenToOthers reports false: here (Windows) a file's mode bits say only
// whether it is read-only, not who may read it; access is by ACL, and Dir
// is in the user's profile, whose ACL admits only the user, SYSTEM and
// Administrators. A secret file kept elsewhere is as private as its
// folder's ACL makes it (docs/platforms.md).
func OpenToOthers(os.FileInfo) bool { return false }

// ownedBySelf cannot tell on this system; the directory's ACL is trusted.
func ownedBySelf(os.FileInfo) bool { return true }
