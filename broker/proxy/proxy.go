// Package proxy says who the client of a request is when the broker runs
// behind reverse proxies (--trusted-proxies): the per-address connection
// limits (broker/eio) and the logs count the client, not the proxy every
// client comes through. One function owns that answer: Trust.Client.
package proxy

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// maxHops bounds how many X-Forwarded-For entries are looked at, from the
// right: a chain of trusted proxies is short, and a client may send a
// header as long as the server allows.
const maxHops = 32

// Trust is the set of proxies whose X-Forwarded-For is believed. The zero
// value trusts none: the peer is the client and the header is ignored.
// It is read-only once made, and safe for concurrent use.
type Trust struct {
	prefixes []netip.Prefix
}

// Parse reads a comma-separated list of CIDRs or single addresses
// (--trusted-proxies); "" trusts none.
func Parse(s string) (Trust, error) {
	var t Trust
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			a, aerr := netip.ParseAddr(item)
			if aerr != nil || a.Zone() != "" {
				return Trust{}, fmt.Errorf("trusted proxy %q is not a CIDR or an address", item)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			// ::ffff:10.0.0.0/104 is 10.0.0.0/8: peers are compared unmapped.
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	return t, nil
}

// Enabled reports whether any proxy is trusted.
func (t Trust) Enabled() bool { return len(t.prefixes) > 0 }

// String lists the trusted prefixes, for logs.
func (t Trust) String() string {
	s := make([]string, len(t.prefixes))
	for i, p := range t.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (t Trust) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the address of r's client: r.RemoteAddr (host:port) unless
// the peer is a trusted proxy, and then the rightmost X-Forwarded-For
// address that is not itself a trusted proxy (an address, no port). An
// entry that is not an address stops the walk: the client is the last
// address before it, since whatever a client wrote to the left of the
// proxies' own entries is not to be believed.
func (t Trust) Client(r *http.Request) string {
	return t.ClientOf(r.RemoteAddr, r.Header.Values("X-Forwarded-For"))
}

// ClientOf is Client for a peer address (host:port) and the values of the
// X-Forwarded-For headers, in order.
func (t Trust) ClientOf(remote string, forwarded []string) string {
	if len(t.prefixes) == 0 || len(forwarded) == 0 {
		return remote
	}
	peer, err := netip.ParseAddrPort(remote)
	if err != nil || !t.trusts(peer.Addr()) {
		return remote
	}
	client := ""
	hops := 0
	for i := len(forwarded) - 1; i >= 0; i-- {
		rest := forwarded[i]
		for rest != "" && hops < maxHops {
			var entry string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				entry, rest = rest[j+1:], rest[:j]
			} else {
				entry, rest = rest, ""
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			hops++
			a, ok := parseEntry(entry)
			if !ok {
				return orPeer(client, remote)
			}
			client = a.String()
			if !t.trusts(a) {
				return client
			}
		}
	}
	// Every entry was a trusted proxy (or too many): the leftmost looked at.
	return orPeer(client, remote)
}

func orPeer(client, remote string) string {
	if client == "" {
		return remote
	}
	return client
}

// parseEntry reads one X-Forwarded-For entry: an address, or an address
// and port as some proxies write it ("192.0.2.1:4711", "[2001:db8::1]:4711").
func parseEntry(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
