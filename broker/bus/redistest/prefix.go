package redistest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var prefixSeq atomic.Int64

// Prefix returns a key and channel prefix of t's own, so that tests sharing
// a server cannot see each other's keys or messages.
func Prefix(t testing.TB) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test:%s:%d:%d:", name, time.Now().UnixNano(), prefixSeq.Add(1))
}
