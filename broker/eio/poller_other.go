//go:build !linux

package eio

import "errors"

// Without epoll there is no poller: an idle connection keeps its reading
// goroutine (poller_linux.go has the reason for one).
type poller struct{}

func newPoller() (*poller, error) { return nil, errors.New("no socket poller on this platform") }

func (p *poller) park(*sock) error { return errors.New("no socket poller on this platform") }

func (p *poller) forget(*sock) {}

func (p *poller) close() error { return nil }
