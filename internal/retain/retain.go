// Package retain bounds the finished entries a table keeps: ended terminal
// sessions and ended debug sessions stay readable for a while (their output,
// their exit code, "session_ended" rather than "not found"), and the oldest
// beyond a bound are forgotten, so that a workspace that starts sessions all
// day holds a bounded number of them.
package retain

import "slices"

// Prune forgets the oldest finished entries beyond the newest keep of them:
// it deletes them from byID and returns order (ids, oldest first) without
// them. Entries that are not done stay, however many there are. done is
// called with the caller's lock held, so it must not take that lock.
func Prune[V any](order []string, byID map[string]V, done func(V) bool, keep int) []string {
	ended := 0
	for _, id := range order {
		if done(byID[id]) {
			ended++
		}
	}
	for i := 0; ended > keep && i < len(order); {
		if id := order[i]; done(byID[id]) {
			delete(byID, id)
			order = slices.Delete(order, i, i+1)
			ended--
			continue
		}
		i++
	}
	return order
}
