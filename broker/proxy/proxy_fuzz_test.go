package proxy_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/tetherdev/tether/broker/proxy"
)

// FuzzClientOf feeds X-Forwarded-For values a client controls: the answer
// is always the peer or an address the header holds, never a panic.
func FuzzClientOf(f *testing.F) {
	for _, seed := range []string{"198.51.100.1", "6.6.6.6, 198.51.100.1, 10.9.9.9", "[2001:db8::1]:80", "garbage,,", "", ",", "1.2.3.4:99999", "fe80::1%eth0"} {
		f.Add(seed)
	}
	trust, err := proxy.Parse("10.0.0.0/8")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, xff string) {
		const peer = "10.1.2.3:5000"
		got := trust.ClientOf(peer, []string{xff})
		if got == peer {
			return
		}
		a, err := netip.ParseAddr(got)
		if err != nil {
			t.Fatalf("ClientOf(%q) = %q: neither the peer nor an address", xff, got)
		}
		if !strings.Contains(xff, strings.TrimPrefix(a.String(), "::ffff:")) && !strings.Contains(strings.ToLower(xff), strings.ToLower(a.String())) {
			// Addresses are printed canonically; a long form in the header
			// is still that address.
			found := false
			for _, e := range strings.Split(xff, ",") {
				e = strings.TrimSpace(e)
				if b, err := netip.ParseAddr(e); err == nil && b.Unmap() == a {
					found = true
				}
				if ap, err := netip.ParseAddrPort(e); err == nil && ap.Addr().Unmap() == a {
					found = true
				}
			}
			if !found {
				t.Fatalf("ClientOf(%q) = %q: not in the header", xff, got)
			}
		}
	})
}

// FuzzParse feeds --trusted-proxies values: an error or a Trust, never a
// panic.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"10.0.0.0/8", "127.0.0.1, ::1", "::ffff:10.0.0.0/104", "::ffff:0:0/90", "x/y", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := proxy.Parse(s)
		if err != nil {
			return
		}
		_ = tr.ClientOf("10.1.2.3:5000", []string{"198.51.100.1"})
	})
}
