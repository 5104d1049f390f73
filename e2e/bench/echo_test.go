package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// echoAddrEnv, when set in the environment of this test binary, makes it the
// baseline server listening on that address instead of running benchmarks.
const echoAddrEnv = "TETHER_BENCH_ECHO_ADDR"

// echoCallPath is where the baseline accepts calls. It does the least a
// relay must do in one hop: read the call, decode it, answer a ToolResponse
// carrying the payload. No second hop, no auth, no correlation.
const echoCallPath = "/api/v1/workspaces/bench/calls"

type echoCall struct {
	Endpoint string          `json:"endpoint"`
	Payload  json.RawMessage `json:"payload"`
	Timeout  float64         `json:"timeout"`
}

type echoResponse struct {
	Success bool            `json:"success"`
	Result  json.RawMessage `json:"result"`
}

func echoHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	mux.HandleFunc("POST "+echoCallPath, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var call echoCall
		if err := json.Unmarshal(body, &call); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := json.Marshal(echoResponse{Success: true, Result: call.Payload})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
	return mux
}

// serveEcho runs the baseline server until SIGTERM or SIGINT and returns the
// exit code.
func serveEcho(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "echo: listening: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: echoHandler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		fmt.Fprintf(os.Stderr, "echo: serving: %v\n", err)
		return 1
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "echo: shutdown: %v\n", err)
		return 1
	}
	return 0
}
