package bus

import "testing"

// TestSlotMatchesRedis checks the hash slot function against values
// reported by redis-server 7.0 (CLUSTER KEYSLOT), hash tags included.
func TestSlotMatchesRedis(t *testing.T) {
	for key, want := range map[string]uint16{
		"123456789":            12739,
		"":                     0,
		"foo":                  12182,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363, // empty tag: the whole key counts
		"foo{{bar}}zap":        4015, // tag "{bar"
		"foo{bar}{zap}":        5061, // first tag only
		"tether:ws:abc":        4084,
		"{":                    4092,
		"}{x}":                 16287,
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}
