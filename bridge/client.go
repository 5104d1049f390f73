//go:build !windows

package bridge

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/protocol"
)

// Engine.IO's own defaults, for an open packet that leaves them out.
const (
	defaultPingInterval = 25 * time.Second
	defaultPingTimeout  = 20 * time.Second
	defaultMaxPayload   = 1_000_000
)

// readLimitSlack lets a frame exceed the broker's maxPayload by the
// envelope around a payload (event name, ack id, tool_call fields), in case
// the broker bounds the payload rather than the frame.
const readLimitSlack = 16 << 10

// handshakeReadLimit bounds frames before the open packet told us the real
// limit; the open packet is a few hundred bytes.
const handshakeReadLimit = 64 << 10

var (
	errReplaced    = errors.New("replaced: a newer connection took over the workspace")
	errPingTimeout = errors.New("no ping from the broker in time")
)

// connectLoop connects, serves, and reconnects with backoff until ctx ends.
func (b *Bridge) connectLoop(ctx context.Context) {
	attempt := 0
	for {
		b.log.Debug().Str("url", b.wsURL).Int("attempt", attempt).Msg("connecting to broker")
		connected, err := b.runSession(ctx)
		if ctx.Err() != nil {
			b.log.Info().Msg("disconnected: bridge stopping")
			return
		}
		if connected {
			attempt = 0
		}
		delay := b.retryDelay(err, attempt, connected)
		attempt++
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			b.log.Info().Msg("disconnected: bridge stopping")
			return
		case <-t.C:
		}
	}
}

// retryDelay picks the wait before the next attempt and logs why.
func (b *Bridge) retryDelay(err error, attempt int, wasConnected bool) time.Duration {
	var ce *connectError
	switch {
	case errors.As(err, &ce) && ce.permanent():
		d := equalJitter(b.cfg.AuthBackoff)
		b.log.Error().Err(err).Str("code", ce.code).Dur("retry_in", d).
			Msg("broker refused the bridge's credentials; check the token and workspace id")
		return d
	case errors.Is(err, errReplaced):
		d := equalJitter(b.cfg.ReplacedBackoff)
		b.log.Warn().Err(err).Dur("retry_in", d).
			Msg("disconnected: another bridge or IDE took over this workspace; reconnecting will take it back")
		return d
	}
	d := fullJitter(b.cfg.BackoffMin, b.cfg.BackoffMax, attempt)
	msg := "connecting to broker failed; reconnecting"
	if wasConnected {
		msg = "disconnected from broker; reconnecting"
	}
	b.log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in", d).Msg(msg)
	return d
}

// fullJitter is a random delay in [0, min(hi, lo·2^attempt)).
func fullJitter(lo, hi time.Duration, attempt int) time.Duration {
	ceil := hi
	if attempt < 62 && lo<<attempt > 0 && lo<<attempt < hi {
		ceil = lo << attempt
	}
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil)
}

// equalJitter is a random delay in [d/2, d): long on purpose, spread so that
// many bridges do not retry in step.
func equalJitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d/2 + rand.N(d/2)
}

// runSession makes one connection and serves it until it ends. connected
// reports whether the broker accepted the connection, which resets the
// backoff; err says why the connection ended or failed.
func (b *Bridge) runSession(ctx context.Context) (connected bool, err error) {
	hsCtx, cancel := context.WithTimeout(ctx, b.cfg.HandshakeTimeout)
	defer cancel()
	conn, resp, err := websocket.Dial(hsCtx, b.wsURL, &websocket.DialOptions{
		HTTPClient: b.cfg.HTTPClient,
		HTTPHeader: b.header,
	})
	if err != nil {
		if resp != nil {
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				err = &connectError{code: protocol.CodeUnauthorized, message: "HTTP 401 on the WebSocket upgrade"}
			case http.StatusForbidden:
				err = &connectError{code: protocol.CodeForbidden, message: "HTTP 403 on the WebSocket upgrade"}
			}
		}
		return false, fmt.Errorf("dialing broker: %w", err)
	}
	info, sid, err := b.handshake(hsCtx, conn)
	if err != nil {
		_ = conn.CloseNow()
		if ce := (*connectError)(nil); errors.As(err, &ce) {
			b.auditConnection(audit.ConnectRefused, "", 0, err)
		}
		return false, err
	}
	s := newSession(b, ctx, conn, info, sid)
	since := time.Now()
	b.auditConnection(audit.Connect, sid, 0, nil)
	b.setConnected(true)
	defer b.setConnected(false)
	err = s.serve(ctx)
	b.auditConnection(audit.Disconnect, sid, audit.Since(since), err)
	return true, err
}

// handshake reads the Engine.IO open packet, sends the Socket.IO CONNECT with
// the credentials, and waits for the broker's answer: the broker's Engine.IO
// settings and the Socket.IO sid. hsCtx bounds it. The caller closes conn on
// error.
func (b *Bridge) handshake(hsCtx context.Context, conn *websocket.Conn) (info protocol.OpenInfo, sid string, err error) {
	conn.SetReadLimit(handshakeReadLimit)
	typ, data, err := conn.Read(hsCtx)
	if err != nil {
		return info, "", fmt.Errorf("reading open packet: %w", err)
	}
	pkt, err := protocol.DecodeEIO(data)
	if err != nil || typ != websocket.MessageText || pkt.Type != protocol.EIOOpen {
		return info, "", fmt.Errorf("expected an engine.io open packet, got %q", truncate(data))
	}
	info, err = protocol.DecodeOpen(pkt.Data)
	if err != nil {
		return info, "", fmt.Errorf("reading open packet: %w", err)
	}
	if info.PingInterval <= 0 {
		info.PingInterval = int(defaultPingInterval / time.Millisecond)
	}
	if info.PingTimeout <= 0 {
		info.PingTimeout = int(defaultPingTimeout / time.Millisecond)
	}
	if info.MaxPayload <= 0 {
		info.MaxPayload = defaultMaxPayload
	}
	conn.SetReadLimit(int64(info.MaxPayload) + readLimitSlack)

	if err := conn.Write(hsCtx, websocket.MessageText, connectFrame(b.cfg.Token, b.cfg.WorkspaceID)); err != nil {
		return info, "", fmt.Errorf("sending CONNECT: %w", err)
	}
	for {
		typ, data, err := conn.Read(hsCtx)
		if err != nil {
			return info, "", fmt.Errorf("waiting for CONNECT answer: %w", err)
		}
		if typ != websocket.MessageText {
			continue
		}
		pkt, err := protocol.DecodeEIO(data)
		if err != nil {
			b.log.Warn().Err(err).Msg("malformed packet from broker ignored")
			continue
		}
		switch pkt.Type {
		case protocol.EIOPing:
			if err := conn.Write(hsCtx, websocket.MessageText, protocol.AppendEIO(nil, protocol.EIOPong, pkt.Data)); err != nil {
				return info, "", fmt.Errorf("answering ping: %w", err)
			}
			continue
		case protocol.EIOClose:
			return info, "", errors.New("broker closed the connection during the handshake")
		case protocol.EIOMessage:
		default:
			continue
		}
		p, err := protocol.DecodeSIO(pkt.Data)
		if err != nil {
			if len(pkt.Data) > 0 && protocol.SIOType(pkt.Data[0]) == protocol.SIODisconnect {
				return info, "", serverDisconnect(disconnectReason(pkt.Data[1:]))
			}
			b.log.Warn().Err(err).Msg("malformed packet from broker ignored")
			continue
		}
		if p.Namespace != "/" {
			continue
		}
		switch p.Type {
		case protocol.SIOConnect:
			return info, decodeConnectAck(p.Data), nil
		case protocol.SIOConnectError:
			return info, "", decodeConnectError(p.Data)
		case protocol.SIODisconnect:
			return info, "", serverDisconnect("")
		}
	}
}

var errServerClose = errors.New("broker closed the connection")

// serverDisconnect is the error for a DISCONNECT from the broker.
func serverDisconnect(reason string) error {
	if reason == "replaced" {
		return errReplaced
	}
	if reason == "" {
		return errors.New("broker disconnected the bridge")
	}
	return fmt.Errorf("broker disconnected the bridge: %s", reason)
}

func truncate(b []byte) string {
	const n = 64
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
