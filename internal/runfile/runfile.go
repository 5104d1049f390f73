// Package runfile keeps the per-start files of tether's local doors (the
// bridge listener's token, a broker's generated secret) where only this
// user can read them.
package runfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dir is the directory of the per-start files of tether's local doors
// (the bridge listener's token, a broker's generated secret):
// $XDG_RUNTIME_DIR/tether, or the user's cache directory's tether/run.
// It is not created here: see Write.
func Dir() (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "tether"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding a directory for tether's run files: %w", err)
	}
	return filepath.Join(d, "tether", "run"), nil
}

// Write writes data to path, readable by this user only (0600), in a
// directory only this user can enter (0700, created if missing). An
// existing directory that others may enter, or that another user owns, is
// refused rather than trusted. The file is replaced by a rename, so a
// reader never sees it half written.
func Write(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if OpenToOthers(st) {
		return fmt.Errorf("%s is open to other users (mode %o): want 0700", dir, st.Mode().Perm())
	}
	if !ownedBySelf(st) {
		return fmt.Errorf("%s belongs to another user", dir)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
