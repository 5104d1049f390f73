//go:build !windows

package terminal

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/protocol"
)

// spec is a validated ExecRequest.
type spec struct {
	command string
	cwd     string // resolved and inside the root, or "" when not given
	env     map[string]string
	async   bool
	hidden  bool
	timeout time.Duration // 0 when not given
	stdin   *string
}

func (m *Manager) parse(req ExecRequest) (spec, error) {
	sp := spec{command: req.Command, env: req.Env, hidden: req.Hidden, stdin: req.Stdin}
	if strings.TrimSpace(req.Command) == "" {
		return spec{}, protocol.Errorf(protocol.CodeInvalidPayload, "command is empty")
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return spec{}, protocol.Errorf(protocol.CodeInvalidPayload, "command contains a NUL byte")
	}
	switch req.Mode {
	case "", ModeSync:
	case ModeAsync:
		sp.async = true
	default:
		return spec{}, protocol.Errorf(protocol.CodeInvalidPayload, "mode must be %q or %q, not %q", ModeSync, ModeAsync, req.Mode)
	}
	t := req.Timeout
	if t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
		return spec{}, protocol.Errorf(protocol.CodeInvalidPayload, "timeout must be a number of seconds >= 0, not %v", t)
	}
	sp.timeout = min(time.Duration(min(t, maxTimeout.Seconds())*float64(time.Second)), maxTimeout)
	for k, v := range req.Env {
		if !isShellName(k) {
			return spec{}, protocol.Errorf(protocol.CodeInvalidPayload, "env name %q is not a valid variable name", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return spec{}, protocol.Errorf(protocol.CodeInvalidPayload, "env %s contains a NUL byte", k)
		}
	}
	if req.Cwd != "" {
		cwd, err := resolveCwd(m.root, req.Cwd)
		if err != nil {
			return spec{}, err
		}
		sp.cwd = cwd
	}
	return sp, nil
}

// resolveCwd turns a requested working directory, relative to root or
// absolute, into a real path that is an existing directory inside root.
// Symlinks are resolved first, so a link cannot lead outside. root must
// itself be a resolved absolute path.
func resolveCwd(root, cwd string) (string, error) {
	if strings.IndexByte(cwd, 0) >= 0 {
		return "", protocol.Errorf(protocol.CodeInvalidPayload, "cwd %q contains a NUL byte", cwd)
	}
	p := cwd
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	if !within(root, p) {
		return "", protocol.Errorf(protocol.CodeInvalidPayload, "cwd %q is outside the root %q", cwd, root)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", protocol.Errorf(protocol.CodeInvalidPayload, "cwd %q does not exist", p)
	}
	if !within(root, real) {
		return "", protocol.Errorf(protocol.CodeInvalidPayload, "cwd %q leads outside the root %q", cwd, root)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", protocol.Errorf(protocol.CodeInvalidPayload, "cwd %q is not a directory", p)
	}
	return real, nil
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// isShellName reports whether s can be assigned in bash: a letter or
// underscore, then letters, digits and underscores.
func isShellName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// shellQuote quotes s as one bash word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func unixSignalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return sig.String()
}
