package bus

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// LogRedisTo sends go-redis's own log lines (a pool that failed to dial, a
// pub/sub connection discarded, …) to log as warnings with component
// "redis", instead of the plain lines go-redis writes to stderr by default,
// outside a broker's JSON log. go-redis has one logger per process
// (redis.SetLogger), so this is called once, at the start of a command
// that uses Redis, before its first client is made.
func LogRedisTo(log zerolog.Logger) {
	redis.SetLogger(redisLogger{log: log.With().Str("component", "redis").Logger()})
}

// redisLogger is go-redis's internal.Logging on zerolog.
type redisLogger struct{ log zerolog.Logger }

// Printf implements go-redis's logger. Its lines repeat a "redis: " that
// the component already says.
func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.Warn().Msg(msg)
}
