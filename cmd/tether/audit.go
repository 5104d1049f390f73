package main

import (
	"context"
	"flag"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/audit"
)

// auditFlags select the audit log (package audit, docs/audit.md) of a
// broker or a bridge.
type auditFlags struct{ path string }

func (f *auditFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.path, "audit-log", "", "write one JSON line per connection event and call to this file (created 0600, appended to, reopened on SIGHUP), or - for stdout; default: none")
}

// auditCloseWait bounds how long a stopping process waits for the audit
// log's last lines to be written.
const auditCloseWait = 10 * time.Second

// open opens the audit log, nil without --audit-log; its file is reopened
// on every SIGHUP (logrotate renames it, then signals). closeLog writes
// the lines queued and closes it: call it after the process has stopped
// serving, so that the last lines of a clean stop are in the file.
func (f *auditFlags) open(component, instance string, log zerolog.Logger) (l *audit.Log, closeLog func(), err error) {
	if f.path == "" {
		return nil, func() {}, nil
	}
	l, err = audit.Open(f.path, audit.Options{Instance: instance, Component: component, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	removeHangup := onHangup(func() {
		if err := l.Reopen(); err != nil {
			log.Error().Err(err).Msg("SIGHUP: audit log not reopened; writing on to the old file")
			return
		}
		log.Info().Str("audit_log", f.path).Msg("SIGHUP: audit log reopened")
	})
	log.Info().Str("audit_log", f.path).Msg("audit log on")
	return l, func() {
		removeHangup()
		ctx, cancel := context.WithTimeout(context.Background(), auditCloseWait)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			log.Warn().Err(err).Msg("closing the audit log")
		}
	}, nil
}
