package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// The HTTP API of async calls (docs/async-calls.md):
//
//	POST /api/v1/workspaces/{id}/calls  "async":true or Prefer: respond-async → 202
//	GET  /api/v1/calls/{correlation_id}[?wait=S]                            → 200
//	POST /api/v1/calls/{correlation_id}/cancel                              → 200
//
// Each answers the call's record (store.Record), or an error object with a
// code. Records live in the store, so any instance on it answers for any
// call. The work is the broker's caller.BusCaller's (Submit, Status, Wait,
// Cancel); this file adds HTTP, auth and the bounds.

// maxWait bounds ?wait=.
const maxWait = caller.MaxWaitPerRequest

// preferences is what a request's Prefer header (RFC 7240) asks of a call:
// respond-async, and wait=S, the seconds an async submit may hold its
// answer for the outcome.
type preferences struct {
	async     bool
	wait      time.Duration
	waitGiven bool
}

// parsePrefer reads the Prefer headers. A wait that is not seconds from 0
// to maxWait (a decimal number, as ?wait=) is an error naming it, returned
// with what the rest of the headers ask (respond-async still counts);
// preferences tether does not know are ignored, as RFC 7240 asks.
func parsePrefer(values []string) (preferences, error) {
	var p preferences
	var bad error
	for _, v := range values {
		for pref := range strings.SplitSeq(v, ",") {
			pref, _, _ = strings.Cut(pref, ";") // parameters: none known
			name, value, hasValue := strings.Cut(pref, "=")
			switch name = strings.TrimSpace(name); {
			case strings.EqualFold(name, "respond-async"):
				p.async = true
			case strings.EqualFold(name, "wait"):
				value = strings.TrimSpace(value)
				if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
					value = value[1 : len(value)-1]
				}
				d, err := parseWait(value, true)
				if err != nil || !hasValue {
					if bad == nil {
						bad = errors.New("Prefer: wait must be a number of seconds from 0 to " + strconv.Itoa(int(maxWait.Seconds())) + ", got " + strconv.Quote(strings.TrimSpace(pref)))
					}
					continue
				}
				p.wait, p.waitGiven = d, true
			}
		}
	}
	return p, bad
}

// asyncStatus is the HTTP status of an async request that failed with code.
func asyncStatus(code string) int {
	switch code {
	case protocol.CodeInvalidRequest:
		return http.StatusBadRequest
	case protocol.CodeUnauthorized:
		return http.StatusUnauthorized
	case protocol.CodeForbidden:
		return http.StatusForbidden
	case protocol.CodeCallNotFound:
		return http.StatusNotFound
	case protocol.CodeConflict:
		return http.StatusConflict
	case protocol.CodeBusUnavailable, protocol.CodeBrokerShutdown, protocol.CodeCallerClosed:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func asyncError(w writer, err error) {
	fail := protocol.FailureFrom("", err, protocol.CodeInternalError)
	apiError(w, asyncStatus(fail.Error), fail.Error, fail.Message)
}

// submit answers a POST .../calls that asks for an async call: 202 with the
// record once the store holds it, never before. With Prefer: wait=S it
// holds the answer up to S seconds for the outcome: a call that ends in
// time is answered 200 with its final record, as GET ...?wait=S would; one
// that does not, 202 with its record then. Such a submit, for a workspace
// a local holder has, without a correlation id or idempotency key of the caller's,
// is recorded once, when it must be (Core.Submit).
//
// span is the submit's trace (callSpan; nil when none): it ends with the
// submit's answer, and goes to Core.Submit in the context.
func (a *API) submit(ctx context.Context, w writer, ws string, req protocol.ToolCall, prefer preferences, span trace.Span) {
	a.calls.Add(1)
	defer a.calls.Done()
	if span != nil && span.IsRecording() {
		span.SetAttributes(tracing.CallAttributes(ws, req.Endpoint, req.CorrelationID)...)
	}
	rec, waited, err := a.core.Submit(withSpan(ctx, span), ws, callerRequest(ws, &req), prefer.wait)
	if err != nil {
		a.log.Debug().Err(err).Str("correlation_id", req.CorrelationID).Str("endpoint", req.Endpoint).Str("workspace_id", ws).Msg("async call refused")
		fail := protocol.FailureFrom("", err, protocol.CodeInternalError)
		traceEnd(span, &fail)
		asyncError(w, err)
		return
	}
	if span != nil && span.IsRecording() && req.CorrelationID == "" {
		span.SetAttributes(tracing.CorrelationID.String(rec.CorrelationID))
	}
	ok := protocol.ToolResponse{Success: true}
	traceEnd(span, &ok)
	a.metrics.asyncSubmitted.Inc()
	w.Header("Location", "/api/v1/calls/"+url.PathEscape(rec.CorrelationID))
	status := http.StatusAccepted
	if prefer.wait > 0 && !waited && !store.IsFinal(rec.Status) {
		// The token may call ws, the record's workspace: no check to make.
		// A wait cut short (the request went, shutdown) answers the
		// record as it was.
		if final, err := a.caller.WaitFor(ctx, rec.CorrelationID, prefer.wait, nil); err == nil && final.CorrelationID != "" {
			rec = final
		}
	}
	var applied []string
	if prefer.waitGiven {
		applied = append(applied, "wait="+strconv.FormatFloat(prefer.wait.Seconds(), 'f', -1, 64))
	}
	if prefer.wait > 0 && store.IsFinal(rec.Status) {
		status = http.StatusOK
	}
	if prefer.async && status == http.StatusAccepted {
		applied = append(applied, "respond-async")
	}
	if len(applied) > 0 {
		w.Header("Preference-Applied", strings.Join(applied, ", "))
	}
	noteRecord(w, &rec)
	writeRecord(w, status, &rec)
}

// callerAllowed checks a request's token for the API of async calls; it
// answers the request itself and returns nil when the token is refused.
func (a *API) callerAllowed(w writer, token string) *auth.Claims {
	claims, err := a.auth.Verify(token, auth.RoleCaller, "")
	notePrincipal(w, claims)
	if err != nil {
		refuse(w, err)
		return nil
	}
	return claims
}

// covers is the check that a token may read and cancel a call: it may call
// the call's workspace.
func covers(claims *auth.Claims) func(*store.Record) error {
	return func(rec *store.Record) error {
		if !claims.Allows(rec.WorkspaceID) {
			return protocol.Errorf(protocol.CodeForbidden, "token does not cover workspace %s", strconv.Quote(rec.WorkspaceID))
		}
		return nil
	}
}

// handleCallStatus answers GET /api/v1/calls/{cid} through net/http.
func (a *API) handleCallStatus(c *gin.Context) {
	a.callStatus(c.Request.Context(), a.noted(c, audit.AsyncStatus, "", c.Param("cid"), time.Now()), bearer(c.Request), c.Param("cid"), c.Query("wait"), c.Request.URL.Query().Has("wait"))
}

// callStatus answers GET /api/v1/calls/{cid}: the record now, or with
// ?wait=S (waitGiven) as soon as the call is final and at the latest after
// S seconds. Both servers of the API call it.
func (a *API) callStatus(ctx context.Context, w writer, token, cid, waitQuery string, waitGiven bool) {
	wait, err := parseWait(waitQuery, waitGiven)
	if err != nil {
		apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, err.Error())
		return
	}
	a.calls.Add(1)
	defer a.calls.Done()
	claims := a.callerAllowed(w, token)
	if claims == nil {
		return
	}
	rec, err := a.caller.WaitFor(ctx, cid, wait, covers(claims))
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) || (pe.Code != protocol.CodeCallerClosed && pe.Code != protocol.CodeCancelled) || rec.CorrelationID == "" {
			asyncError(w, err)
			return
		}
		// Shutting down, or the request went: the status as last read.
	}
	noteRecord(w, &rec)
	writeRecord(w, http.StatusOK, &rec)
}

// parseWait reads ?wait=: seconds from 0 to maxWait.
func parseWait(s string, given bool) (time.Duration, error) {
	if !given {
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxWait.Seconds() {
		return 0, errors.New("wait must be a number of seconds from 0 to " + strconv.Itoa(int(maxWait.Seconds())) + ", got " + strconv.Quote(s))
	}
	return time.Duration(f * float64(time.Second)), nil
}

// handleCallCancel answers POST /api/v1/calls/{cid}/cancel through
// net/http.
func (a *API) handleCallCancel(c *gin.Context) {
	a.callCancel(c.Request.Context(), a.noted(c, audit.AsyncCancel, "", c.Param("cid"), time.Now()), bearer(c.Request), c.Param("cid"))
}

// callCancel answers POST /api/v1/calls/{cid}/cancel with the record after
// the cancel: cancelled, or the outcome the call already had. Both servers
// of the API call it.
func (a *API) callCancel(ctx context.Context, w writer, token, cid string) {
	a.calls.Add(1)
	defer a.calls.Done()
	claims := a.callerAllowed(w, token)
	if claims == nil {
		return
	}
	if _, err := a.caller.WaitFor(ctx, cid, 0, covers(claims)); err != nil {
		asyncError(w, err)
		return
	}
	rec, err := a.caller.Cancel(ctx, cid)
	if err != nil {
		asyncError(w, err)
		return
	}
	noteRecord(w, &rec)
	writeRecord(w, http.StatusOK, &rec)
}

// writeRecord answers rec as JSON (store.Record.AppendJSON: json.Marshal's
// bytes, without its reflection).
func writeRecord(w writer, status int, rec *store.Record) {
	w.Data(status, "application/json; charset=utf-8", rec.AppendJSON(nil))
}
