//go:build !windows

package dap

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

func TestPathMapMapsBothWaysByTheLongestRoot(t *testing.T) {
	root := "/work/ws"
	pm, err := newPathMap(root, []PathMapping{
		{LocalRoot: ".", RemoteRoot: "/srv/app/"},
		{LocalRoot: "vendor/lib", RemoteRoot: "/opt/lib"},
		{LocalRoot: "win", RemoteRoot: `C:\build\src`},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ local, remote string }{
		{"/work/ws/main.go", "/srv/app/main.go"},
		{"/work/ws/vendor/lib/a.go", "/opt/lib/a.go"},              // the longer root wins
		{"/work/ws/vendor/libx/a.go", "/srv/app/vendor/libx/a.go"}, // not on a separator boundary
		{"/work/ws/win/dir/x.c", `C:\build\src\dir\x.c`},
	} {
		if got := pm.remote(c.local); got != c.remote {
			t.Errorf("remote(%s) = %s, want %s", c.local, got, c.remote)
		}
		if got := pm.local(c.remote); got != c.local {
			t.Errorf("local(%s) = %s, want %s", c.remote, got, c.local)
		}
	}
	// Paths outside every mapping pass unchanged, both ways.
	for _, p := range []string{"/usr/lib/go/src/fmt/print.go", "/srv/application/x.go", "", "<string>"} {
		if got := pm.local(p); got != p {
			t.Errorf("local(%q) = %q, want it unchanged", p, got)
		}
		if got := pm.remote(p); got != p {
			t.Errorf("remote(%q) = %q, want it unchanged", p, got)
		}
	}
	var none pathMap
	if got := none.local("/srv/app/x"); got != "/srv/app/x" {
		t.Errorf("no mappings changed %q", got)
	}
}

func TestPathMapRefusesBadMappingsNamingTheField(t *testing.T) {
	for _, c := range []struct {
		m     PathMapping
		field string
	}{
		{PathMapping{RemoteRoot: "/srv"}, "path_mappings[0].local_root"},
		{PathMapping{LocalRoot: "."}, "path_mappings[0].remote_root"},
		{PathMapping{LocalRoot: "../elsewhere", RemoteRoot: "/srv"}, "path_mappings[0].local_root"},
		{PathMapping{LocalRoot: "/etc", RemoteRoot: "/srv"}, "path_mappings[0].local_root"},
		{PathMapping{LocalRoot: ".", RemoteRoot: "srv/app"}, "path_mappings[0].remote_root"},
	} {
		_, err := newPathMap("/work/ws", []PathMapping{c.m})
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidPayload || !strings.HasPrefix(pe.Message, c.field) {
			t.Errorf("%+v: %v, want invalid_payload naming %s", c.m, err, c.field)
		}
	}
}

func TestParseAttachAllow(t *testing.T) {
	got, err := ParseAttachAllow(" 10.0.0.0/8, 192.168.1.7 ,::1, 10.1.2.3/16")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.168.1.7/32", "::1/128", "10.1.0.0/16"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("[%d] = %s, want %s", i, got[i], want[i])
		}
	}
	if def, _ := ParseAttachAllow(""); len(def) != 2 || def[0] != DefaultAttachAllow[0] {
		t.Errorf("empty = %v, want the loopback default", def)
	}
	if _, err := ParseAttachAllow("10.0.0.0/8,example.com"); err == nil || !strings.Contains(err.Error(), "example.com") {
		t.Errorf("a host name in the list: %v, want an error naming it", err)
	}
}

func TestGuardAttachChecksEveryAddressAndPinsIt(t *testing.T) {
	ctx := context.Background()
	loop := DefaultAttachAllow
	// A name is resolved and replaced by the checked address.
	cfg := map[string]any{"request": "attach", "connect": map[string]any{"host": "localhost", "port": float64(5678)}}
	if err := guardAttach(ctx, cfg, "", loop); err != nil {
		t.Fatal(err)
	}
	c := cfg["connect"].(map[string]any)
	if a, err := netip.ParseAddr(c["host"].(string)); err != nil || !a.IsLoopback() || c["port"] != 5678 {
		t.Errorf("connect = %v, want a loopback address and port 5678", c)
	}
	refused := []struct {
		cfg   map[string]any
		code  string
		field string
	}{
		{map[string]any{"request": "attach", "connect": map[string]any{"host": "10.0.0.1", "port": 1}}, protocol.CodeForbidden, "connect.host"},
		{map[string]any{"request": "attach", "connect": map[string]any{"host": "::ffff:10.0.0.1", "port": 1}}, protocol.CodeForbidden, "connect.host"},
		{map[string]any{"request": "attach", "mode": "remote", "host": "10.0.0.1", "port": 2345}, protocol.CodeForbidden, "config.host"},
		{map[string]any{"request": "attach", "address": "10.0.0.1", "port": 9229}, protocol.CodeForbidden, "config.address"},
		{map[string]any{"request": "attach", "connect": map[string]any{"port": "http"}}, protocol.CodeInvalidPayload, "connect.port"},
		{map[string]any{"request": "attach", "connect": map[string]any{"port": 1.5}}, protocol.CodeInvalidPayload, "connect.port"},
		{map[string]any{"request": "attach", "connect": map[string]any{"host": "no-such-host.invalid", "port": 1}}, protocol.CodeInvalidPayload, "connect.host"},
	}
	for _, r := range refused {
		prefix := ""
		if _, ok := r.cfg["connect"]; !ok {
			prefix = "config."
		}
		err := guardAttach(ctx, r.cfg, prefix, loop)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != r.code || !strings.HasPrefix(pe.Message, r.field+":") {
			t.Errorf("%v: %v, want %s naming %s", r.cfg, err, r.code, r.field)
		}
	}
	// A launch, or an attach by pid, connects nowhere.
	for _, cfg := range []map[string]any{{"request": "launch", "host": "10.0.0.1", "port": 1}, {"request": "attach", "processId": 42}} {
		if err := guardAttach(ctx, cfg, "", loop); err != nil {
			t.Errorf("%v: %v", cfg, err)
		}
	}
	// An operator's list admits its addresses only.
	lan := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	if err := guardAttach(ctx, map[string]any{"request": "attach", "connect": map[string]any{"host": "10.2.3.4", "port": 1}}, "", lan); err != nil {
		t.Errorf("10.2.3.4 with 10.0.0.0/8 allowed: %v", err)
	}
	if err := guardAttach(ctx, map[string]any{"request": "attach", "connect": map[string]any{"host": "127.0.0.1", "port": 1}}, "", lan); err == nil {
		t.Error("loopback admitted by a list without it")
	}
}

// FuzzPathMappings: any mappings and paths are validated or refused, and
// mapping never panics; a path under a local root comes back from a round
// trip unchanged.
func FuzzPathMappings(f *testing.F) {
	f.Add("app", "/srv/app", "/work/ws/app/x.py")
	f.Add(".", `C:\src`, "/work/ws/a/b.c")
	f.Add("../x", "/", "")
	f.Fuzz(func(t *testing.T, local, remote, p string) {
		pm, err := newPathMap("/work/ws", []PathMapping{{LocalRoot: local, RemoteRoot: remote}})
		if err != nil {
			return
		}
		r := pm.remote(p)
		if p != pm[0].LocalRoot && !under(p, pm[0].LocalRoot) {
			return
		}
		if strings.Contains(p, `\`) || strings.Contains(pm[0].RemoteRoot, `\`) {
			return // separators are rewritten: not a plain round trip
		}
		if back := pm.local(r); back != p {
			t.Errorf("local(remote(%q)) = %q via %q", p, back, r)
		}
	})
}

// FuzzParseAttachAllow: the flag's value is parsed or refused, never
// half-read.
func FuzzParseAttachAllow(f *testing.F) {
	f.Add("127.0.0.0/8,::1")
	f.Add("10.0.0.1, fe80::/10")
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseAttachAllow(s)
		if err != nil {
			return
		}
		for _, p := range ps {
			if !p.IsValid() {
				t.Errorf("%q gave an invalid prefix %v", s, p)
			}
		}
	})
}

// TestGuardAttachRefusesANameWithOneAddressOutside: a name is allowed only
// if every address it resolves to is (a name that also resolves inside
// cannot smuggle a connection out), and the address checked is the one
// the adapter gets. The resolver is faked: this machine's cannot be made to
// answer a name with a chosen set of addresses.
func TestGuardAttachRefusesANameWithOneAddressOutside(t *testing.T) {
	fakeLookup := func(_ context.Context, _, host string) ([]netip.Addr, error) {
		switch host {
		case "split.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.9.9.9")}, nil
		case "inside.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("::1")}, nil
		}
		return nil, errors.New("no such host")
	}
	real := lookupNetIP
	lookupNetIP = fakeLookup
	t.Cleanup(func() { lookupNetIP = real })

	cfg := map[string]any{"request": "attach", "connect": map[string]any{"host": "split.test", "port": 5678}}
	err := guardAttach(context.Background(), cfg, "", DefaultAttachAllow)
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeForbidden || !strings.Contains(pe.Message, "10.9.9.9") {
		t.Fatalf("split.test: %v, want forbidden naming 10.9.9.9", err)
	}
	cfg = map[string]any{"request": "attach", "connect": map[string]any{"host": "inside.test", "port": 5678}}
	if err := guardAttach(context.Background(), cfg, "", DefaultAttachAllow); err != nil {
		t.Fatal(err)
	}
	if got := cfg["connect"].(map[string]any)["host"]; got != "127.0.0.2" {
		t.Errorf("host = %v, want the checked address 127.0.0.2", got)
	}
}
