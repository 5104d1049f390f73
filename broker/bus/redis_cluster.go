package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// clusterTopology maps hash slots to the address of the master serving
// them, as read with CLUSTER SHARDS (Redis 7, like sharded pub/sub itself).
// Sharded subscriptions must be made on that node. It is safe for
// concurrent use.
type clusterTopology struct {
	client *redis.ClusterClient
	tls    bool // the nodes are reached on their TLS ports

	mu    sync.RWMutex
	slots []string // clusterSlots entries; "" for an unserved slot
}

// refresh re-reads the slot map from the cluster.
func (t *clusterTopology) refresh(ctx context.Context) error {
	shards, err := t.client.ClusterShards(ctx).Result()
	if err != nil {
		return fmt.Errorf("reading cluster shards: %w", err)
	}
	slots := make([]string, clusterSlots)
	for _, sh := range shards {
		addr := ""
		for _, n := range sh.Nodes {
			if n.Role == "master" {
				host := n.Endpoint
				if host == "" || host == "?" {
					host = n.IP
				}
				port := n.Port
				if t.tls {
					port = n.TLSPort
				}
				addr = net.JoinHostPort(host, strconv.FormatInt(port, 10))
				break
			}
		}
		if addr == "" {
			continue
		}
		for _, r := range sh.Slots {
			for s := max(r.Start, 0); s <= min(r.End, clusterSlots-1); s++ {
				slots[s] = addr
			}
		}
	}
	t.mu.Lock()
	t.slots = slots
	t.mu.Unlock()
	return nil
}

// addr returns the master serving channel, "" if none is known.
func (t *clusterTopology) addr(channel string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.slots[slot(channel)]
}

// nodeFor returns the master serving channel, re-reading the slot map once
// if the slot is not served.
func (t *clusterTopology) nodeFor(ctx context.Context, channel string) (string, error) {
	if a := t.addr(channel); a != "" {
		return a, nil
	}
	if err := t.refresh(ctx); err != nil {
		return "", err
	}
	if a := t.addr(channel); a != "" {
		return a, nil
	}
	return "", fmt.Errorf("no cluster node serves slot %d", slot(channel))
}

var errNoSlots = errors.New("the node serves no slot")

// pingChannelFor names the private channel a connection pings itself on.
// On a cluster the name must hash to a slot of the connection's node, so a
// counter is appended until it does.
func (r *Redis) pingChannelFor(key connKey) (string, error) {
	base := r.prefix + "ping:" + r.instance + ":" + strconv.Itoa(key.k)
	if r.topo == nil {
		return base, nil
	}
	base += ":"
	for i := range 1 << 16 {
		ch := base + strconv.Itoa(i)
		if r.topo.addr(ch) == key.addr {
			return ch, nil
		}
	}
	return "", fmt.Errorf("choosing a ping channel for %s: %w", key.addr, errNoSlots)
}

// rehomeLocked moves the channels that c's node no longer serves to a
// connection of the node that does, and returns them: the caller sends
// their SUBSCRIBE (sendSubscribe) once it holds no lock. It is called
// between generations, when c has nothing on the wire.
func (c *psConn) rehomeLocked() []*entry {
	r := c.r
	if r.closed {
		return nil
	}
	var moved []*entry
	for ch, e := range c.entries {
		want := r.topo.addr(ch)
		if want == "" || want == c.key.addr {
			continue // unserved slot: keep trying here until it is served
		}
		delete(c.entries, ch)
		target := r.freeConnLocked(want, ch)
		target.addLocked(e)
		moved = append(moved, e)
	}
	if len(moved) > 0 && len(c.entries) == 0 {
		c.emptySince = time.Now()
	}
	return moved
}

// freeConnLocked returns the lowest-index connection to addr that does not
// carry channel at all, creating it if needed.
func (r *Redis) freeConnLocked(addr, channel string) *psConn {
	for k := 0; ; k++ {
		c := r.conns[connKey{addr: addr, k: k}]
		if c == nil {
			return r.newConnLocked(connKey{addr: addr, k: k})
		}
		if c.entries[channel] == nil {
			return c
		}
	}
}

// slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of its hash tag (the part between the first "{" and the next "}",
// if not empty), modulo 16384.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % clusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum
// Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
