package proxy_test

import (
	"net/http/httptest"
	"testing"

	"github.com/tetherdev/tether/broker/proxy"
)

func TestClientIsThePeerUnlessThePeerIsTrusted(t *testing.T) {
	trust, err := proxy.Parse("10.0.0.0/8, 127.0.0.1,2001:db8:1::/48")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"untrusted peer: header ignored", "192.0.2.9:5000", []string{"198.51.100.1"}, "192.0.2.9:5000"},
		{"trusted peer, no header", "10.1.2.3:5000", nil, "10.1.2.3:5000"},
		{"trusted peer", "10.1.2.3:5000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"loopback proxy", "127.0.0.1:5000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"rightmost untrusted wins over a forged left entry", "10.1.2.3:5000", []string{"6.6.6.6, 198.51.100.1"}, "198.51.100.1"},
		{"a chain of trusted proxies is skipped", "10.1.2.3:5000", []string{"6.6.6.6, 198.51.100.1, 10.9.9.9", "10.8.8.8"}, "198.51.100.1"},
		{"every entry trusted: the leftmost", "10.1.2.3:5000", []string{"10.7.7.7, 10.9.9.9"}, "10.7.7.7"},
		{"garbage stops the walk", "10.1.2.3:5000", []string{"198.51.100.1, garbage, 10.9.9.9"}, "10.9.9.9"},
		{"garbage first: the peer", "10.1.2.3:5000", []string{"garbage"}, "10.1.2.3:5000"},
		{"entry with a port", "10.1.2.3:5000", []string{"198.51.100.1:4711"}, "198.51.100.1"},
		{"IPv6 entry with a port", "10.1.2.3:5000", []string{"[2001:db8:2::7]:4711"}, "2001:db8:2::7"},
		{"IPv6 proxy", "[2001:db8:1::5]:5000", []string{"203.0.113.4"}, "203.0.113.4"},
		{"mapped peer", "[::ffff:10.1.2.3]:5000", []string{"203.0.113.4"}, "203.0.113.4"},
		{"empty entries", "10.1.2.3:5000", []string{" , 203.0.113.4 ,, "}, "203.0.113.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := trust.Client(r); got != tc.want {
				t.Errorf("Client = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNoTrustIgnoresTheHeader(t *testing.T) {
	var none proxy.Trust
	if got := none.ClientOf("10.1.2.3:5000", []string{"198.51.100.1"}); got != "10.1.2.3:5000" {
		t.Errorf("ClientOf = %q, want the peer", got)
	}
}

func TestParseRefusesWhatIsNotACIDR(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "10.0.0.0/8,nope", "fe80::1%eth0/64"} {
		if _, err := proxy.Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
	tr, err := proxy.Parse(" ::ffff:10.0.0.0/104 , ")
	if err != nil || tr.String() != "10.0.0.0/8" {
		t.Errorf("Parse of a mapped prefix = %q, %v; want 10.0.0.0/8", tr.String(), err)
	}
}
