package retain_test

import (
	"fmt"
	"testing"

	"github.com/tetherdev/tether/internal/retain"
)

func TestPruneForgetsOnlyTheOldestFinishedBeyondKeep(t *testing.T) {
	done := map[string]bool{"a": true, "b": false, "c": true, "d": true, "e": false, "f": true}
	order := []string{"a", "b", "c", "d", "e", "f"}
	byID := map[string]bool{}
	for k, v := range done {
		byID[k] = v
	}
	got := retain.Prune(order, byID, func(v bool) bool { return v }, 2)
	if fmt.Sprint(got) != "[b d e f]" {
		t.Fatalf("order = %v, want [b d e f] (a and c, the oldest done, forgotten)", got)
	}
	if _, ok := byID["a"]; ok || len(byID) != 4 {
		t.Fatalf("byID = %v, want a and c deleted", byID)
	}
	if got := retain.Prune(got, byID, func(v bool) bool { return v }, 2); len(got) != 4 {
		t.Fatalf("a second prune forgot more: %v", got)
	}
}
