//go:build !windows

package dap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Remote attach: a session attached to a debug server that already listens
// at host:port (debugpy --listen, dlv --headless, node --inspect). Two rules
// live here and nowhere else:
//
//   - the allow list: a bridge connects only to addresses its operator
//     allowed (--debug-attach-allow, loopback by default), so that a caller
//     cannot use it to reach other hosts. A host name is resolved once,
//     every address it resolves to must be allowed, and the configuration
//     is rewritten to the checked address, so the adapter connects to what
//     was checked (a second lookup could answer otherwise: DNS rebinding).
//   - path mappings: the program's sources may sit elsewhere on the
//     debuggee's side than under the bridge's root. Breakpoint paths go out
//     mapped local → remote, and the paths of stack frames and breakpoints
//     come back remote → local, by tether for every adapter alike.

// DefaultAttachAllow is where a bridge may attach when its operator said
// nothing: this machine's loopback addresses.
var DefaultAttachAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ParseAttachAllow reads a comma-separated list of CIDR prefixes or single
// addresses (the --debug-attach-allow flag). Empty input is the default.
func ParseAttachAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR prefix nor an IP address", item)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	if out == nil {
		return DefaultAttachAllow, nil
	}
	return out, nil
}

// attachLookupTimeout bounds the resolution of an attach host name.
const attachLookupTimeout = 5 * time.Second

// addressKeys are where a configuration names the server an attach
// connects to: tether's and debugpy's "connect" object, and the top-level
// host (delve's remote attach, debugpy's older spelling) or address
// (node) with port.
var addressKeys = []struct{ obj, host string }{{"connect", "host"}, {"", "host"}, {"", "address"}}

// guardAttach checks the address an attach configuration connects to
// against allow, and rewrites its host to the checked IP. prefix names the
// configuration in errors ("" for the language form, "config." for a
// configuration). A configuration without an address passes unchanged.
func guardAttach(ctx context.Context, cfg map[string]any, prefix string, allow []netip.Prefix) error {
	if cfg["request"] != "attach" {
		return nil
	}
	for _, k := range addressKeys {
		m, field := cfg, prefix
		if k.obj != "" {
			sub, ok := cfg[k.obj].(map[string]any)
			if !ok {
				continue
			}
			m, field = sub, prefix+k.obj+"."
		}
		host, hasHost := m[k.host].(string)
		port, hasPort := m["port"]
		if !hasPort && (k.obj == "" || !hasHost) {
			continue
		}
		n, ok := portNumber(port)
		if !ok {
			return protocol.Errorf(protocol.CodeInvalidPayload, "%sport: %v is not a TCP port (1-65535)", field, port)
		}
		m["port"] = n
		if host == "" {
			host = "127.0.0.1"
		}
		ip, err := allowedAddr(ctx, host, allow)
		if err != nil {
			code := protocol.CodeForbidden
			if errors.Is(err, errLookup) {
				code = protocol.CodeInvalidPayload
			}
			return protocol.Errorf(code, "%s%s: %v", field, k.host, err)
		}
		m[k.host] = ip.String()
	}
	return nil
}

var errLookup = errors.New("cannot resolve")

// lookupNetIP resolves attach host names; tests replace it to answer names
// with several addresses, which this machine's resolver cannot be made to.
var lookupNetIP = net.DefaultResolver.LookupNetIP

// allowedAddr resolves host and returns its first address if every
// address it resolves to lies in allow.
func allowedAddr(ctx context.Context, host string, allow []netip.Prefix) (netip.Addr, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		ctx, cancel := context.WithTimeout(ctx, attachLookupTimeout)
		defer cancel()
		found, err := lookupNetIP(ctx, "ip", host)
		if err != nil || len(found) == 0 {
			return netip.Addr{}, fmt.Errorf("%w %q: %v", errLookup, host, err)
		}
		for _, a := range found {
			addrs = append(addrs, a.Unmap())
		}
	}
	for _, a := range addrs {
		if !inPrefixes(a, allow) {
			what := a.String()
			if what != host {
				what = fmt.Sprintf("%s (%s)", host, a)
			}
			return netip.Addr{}, fmt.Errorf("%s is outside the addresses this bridge may attach to (--debug-attach-allow: %s)", what, prefixList(allow))
		}
	}
	return addrs[0], nil
}

func inPrefixes(a netip.Addr, allow []netip.Prefix) bool {
	for _, p := range allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func portNumber(v any) (int, bool) {
	var n int
	switch p := v.(type) {
	case int:
		n = p
	case float64:
		if p != float64(int(p)) {
			return 0, false
		}
		n = int(p)
	case string:
		var err error
		if n, err = strconv.Atoi(p); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return n, n > 0 && n < 65536
}

// attachRefused is the answer to an attach whose server could not be
// reached: the caller's input named an address nobody serves.
func attachRefused(adapter, addr string, err error) error {
	return protocol.Errorf(protocol.CodeInvalidPayload, "connect: no debug server answers at %s for %s (%v); start it listening first (debugpy --listen, dlv --headless --accept-multiclient, node --inspect)", addr, adapter, err)
}

// pathMap is a session's validated mappings: absolute local roots inside
// the workspace, absolute remote roots, both without a trailing separator.
type pathMap []PathMapping

// newPathMap validates mappings: each local_root (relative to root, or
// absolute) must lie inside root, each remote_root must be absolute.
func newPathMap(root string, mappings []PathMapping) (pathMap, error) {
	var pm pathMap
	for i, m := range mappings {
		field := fmt.Sprintf("path_mappings[%d]", i)
		if m.LocalRoot == "" {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "%s.local_root is required", field)
		}
		if m.RemoteRoot == "" {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "%s.remote_root is required", field)
		}
		local, err := inRoot(root, m.LocalRoot)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "%s.local_root: %v", field, err)
		}
		remote := trimSep(m.RemoteRoot)
		if !isAbsAnywhere(m.RemoteRoot) {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "%s.remote_root: %q is not an absolute path (/… or C:\\…)", field, m.RemoteRoot)
		}
		pm = append(pm, PathMapping{LocalRoot: trimSep(local), RemoteRoot: remote})
	}
	return pm, nil
}

// inRoot is p (relative to root, or absolute) cleaned, if it lies inside
// root.
func inRoot(root, p string) (string, error) {
	abs := absIn(root, p)
	if abs != root && !under(abs, root) {
		return "", fmt.Errorf("%s is outside the workspace root %s", p, root)
	}
	return abs, nil
}

// isAbsAnywhere: an absolute path on a Unix or a Windows debuggee.
func isAbsAnywhere(p string) bool {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\\`) {
		return true
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

func trimSep(p string) string {
	for len(p) > 1 && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, `\`)) && !strings.HasSuffix(p, ":/") && !strings.HasSuffix(p, `:\`) {
		p = p[:len(p)-1]
	}
	return p
}

// under reports whether p lies below dir, on a separator boundary.
func under(p, dir string) bool {
	if !strings.HasPrefix(p, dir) || len(p) == len(dir) {
		return false
	}
	c := p[len(dir)]
	return c == '/' || c == '\\' || strings.HasSuffix(dir, "/") || strings.HasSuffix(dir, `\`)
}

// remote maps a local path out: the longest local root it lies in
// decides. Paths outside every mapping are sent as they are.
func (pm pathMap) remote(p string) string {
	return pm.swap(p, func(m PathMapping) (string, string) { return m.LocalRoot, m.RemoteRoot })
}

// local maps a path the adapter reported back under the bridge's root.
func (pm pathMap) local(p string) string {
	return pm.swap(p, func(m PathMapping) (string, string) { return m.RemoteRoot, m.LocalRoot })
}

func (pm pathMap) swap(p string, dirs func(PathMapping) (from, to string)) string {
	best, bestLen := "", -1
	for _, m := range pm {
		from, to := dirs(m)
		if (p == from || under(p, from)) && len(from) > bestLen {
			rest := p[len(from):]
			// The other side's separator: a Windows remote gets
			// backslashes, a local path slashes.
			if strings.Contains(to, `\`) && !strings.Contains(to, "/") {
				rest = strings.ReplaceAll(rest, "/", `\`)
			} else if strings.Contains(from, `\`) && !strings.Contains(from, "/") {
				rest = strings.ReplaceAll(rest, `\`, "/")
			}
			best, bestLen = to+rest, len(from)
		}
	}
	if bestLen < 0 {
		return p
	}
	return best
}

// releaseRemote readies a remote debuggee for a detach. A debug server
// that outlives the session (a headless delve with --accept-multiclient)
// keeps the debuggee as the disconnect found it: its breakpoints set, and
// halted if it was stopped. A detached program must run on untouched, so
// the session's breakpoints are cleared and a stopped program continued
// first. Sessions whose adapter tether started or serves are left alone:
// their adapter ends with them.
func (s *Session) releaseRemote(ctx context.Context) {
	if s.proc == nil || s.proc.cmd != nil || s.proc.addr == "" {
		return
	}
	c := s.proc.client
	s.mu.Lock()
	files := make([]string, 0, len(s.askedFiles))
	for path := range s.askedFiles {
		files = append(files, path)
	}
	funcs := len(s.askedFuncs) > 0
	stopped := s.state == StateStopped
	thread := 0
	if s.stop != nil {
		thread = s.stop.ThreadID
	}
	s.mu.Unlock()
	for _, path := range files {
		_ = c.Do(ctx, "setBreakpoints", map[string]any{"source": map[string]any{"path": s.paths.remote(path)}, "breakpoints": []any{}}, nil)
	}
	if funcs {
		_ = c.Do(ctx, "setFunctionBreakpoints", map[string]any{"breakpoints": []any{}}, nil)
	}
	if stopped {
		_ = c.Do(ctx, CmdContinue, map[string]any{"threadId": thread}, nil)
	}
}
