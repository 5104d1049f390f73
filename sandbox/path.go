//go:build !windows

package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"strings"

	"github.com/tetherdev/tether/protocol"
)

// MaxPathBytes bounds a path an agent gives, long before the kernel's
// PATH_MAX would.
const MaxPathBytes = 4096

// CleanPath checks a path an agent gave for a file in a tree (a
// workspace, the bridge's root) and returns it relative to the tree,
// slash-separated, "." for the tree itself. Absolute paths, ".."
// components, NUL bytes and paths over MaxPathBytes answer invalid_path,
// with a message naming the field "path". Symlinks are checked later,
// when the path is opened through the tree's os.Root.
func CleanPath(p string) (string, error) { return cleanField("path", p) }

// cleanField is CleanPath for the payload field named field (path, cwd).
func cleanField(field, p string) (string, error) {
	if len(p) > MaxPathBytes {
		return "", protocol.Errorf(protocol.CodeInvalidPath, "%s is %d bytes long; at most %d", field, len(p), MaxPathBytes)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", protocol.Errorf(protocol.CodeInvalidPath, "%s contains a NUL byte", field)
	}
	if strings.HasPrefix(p, "/") {
		return "", protocol.Errorf(protocol.CodeInvalidPath, "%s %q is absolute; give it relative to the workspace", field, p)
	}
	var out []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			return "", protocol.Errorf(protocol.CodeInvalidPath, "%s %q contains '..'", field, p)
		default:
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return ".", nil
	}
	return strings.Join(out, "/"), nil
}

// cleanWritablePath is CleanPath for mutations: the tree itself and its
// .git entry are off limits, since .git tells git where the repository
// is.
func cleanWritablePath(p string) (string, error) {
	rel, err := CleanPath(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", protocol.Errorf(protocol.CodeInvalidPath, "path: the workspace root itself cannot be changed")
	}
	if first, _, _ := strings.Cut(rel, "/"); first == ".git" {
		return "", protocol.Errorf(protocol.CodeInvalidPath, "path %q is inside .git; use the git routes", p)
	}
	return rel, nil
}

// pathError turns an error from an os.Root operation into the answer an
// agent can act on: an escape is invalid_path, a missing file says so.
func pathError(op, rel string, err error) error {
	if err == nil {
		return nil
	}
	// os.Root reports an escape (a symlink leading out, a path that is
	// absolute after resolution) with an unexported error whose text is
	// stable: "path escapes from parent".
	if strings.Contains(err.Error(), "escapes from parent") {
		return protocol.Errorf(protocol.CodeInvalidPath, "%s %s: the path leads outside the workspace (through a symlink)", op, rel)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return &fileError{code: protocol.CodeInvalidPath, msg: op + " " + rel + ": no such file or directory", err: err}
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return &fileError{code: protocol.CodeInvalidPath, msg: op + " " + rel + ": " + pe.Err.Error(), err: err}
	}
	return &fileError{code: protocol.CodeInvalidPath, msg: op + " " + rel + ": " + err.Error(), err: err}
}

// fileError is a coded failure of a file operation that keeps the
// underlying error for errors.Is (fs.ErrNotExist).
type fileError struct {
	code, msg string
	err       error
}

func (e *fileError) Error() string { return e.code + ": " + e.msg }
func (e *fileError) Unwrap() []error {
	return []error{e.err, &protocol.Error{Code: e.code, Message: e.msg}}
}
