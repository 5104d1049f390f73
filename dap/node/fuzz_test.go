//go:build !windows

package node

import (
	"bytes"
	"strings"
	"testing"
)

// Fuzz targets for what the adapter parses from outside: node's stderr
// (the inspector URL line), an inspector's target list, source maps with
// the generated text they map, and hit conditions.

func FuzzInspectorURL(f *testing.F) {
	for _, s := range []string{
		"Debugger listening on ws://127.0.0.1:40579/94d4f959-56b2-4ca7-a5ba-74b458f841fc",
		"Debugger listening on ws://[::1]:9229/x",
		"Debugger listening on ws://127.0.0.1/nope",
		"Debugger listening on http://127.0.0.1:1/x",
		"For help, see: https://nodejs.org/en/docs/inspector",
		"Debugger listening on ws://u:p@h:1/x\r",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		u, ok := ParseInspectorURL(line)
		if !ok {
			return
		}
		if !strings.HasPrefix(u, "ws://") {
			t.Fatalf("%q gave %q, not a ws:// URL", line, u)
		}
		if again, ok := checkWSURL(u); !ok || again != u {
			t.Fatalf("%q: the URL %q does not check again (%q, %v)", line, u, again, ok)
		}
		var urls []string
		urlc := make(chan string, 1)
		scanStderr(strings.NewReader(line+"\nafter\n"), urlc, func(s string) { urls = append(urls, s) })
		if len(urlc) != 1 {
			t.Fatalf("scanStderr missed the URL of %q", line)
		}
	})
}

func FuzzTargetList(f *testing.F) {
	for _, s := range []string{
		`[{"type":"node","title":"x","webSocketDebuggerUrl":"ws://127.0.0.1:9229/abc"}]`,
		`[{"type":"page","webSocketDebuggerUrl":"ws://h:1/p"},{"webSocketDebuggerUrl":"ws://h:2/q"}]`,
		`[]`, `{}`, `[{"webSocketDebuggerUrl":3}]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		u, err := parseTargets(body)
		if err == nil && !strings.HasPrefix(u, "ws://") {
			t.Fatalf("target %q is not a ws:// URL", u)
		}
	})
}

func FuzzSourceMap(f *testing.F) {
	f.Add([]byte(`{"version":3,"file":"app.js","sources":["app.ts"],"names":[],"mappings":"AAKA,SAAS,QAAQ,CAAC,CAAQ;IACvC,MAAM"}`),
		[]byte("function describe(p, scale) {\n    const scaled = 1;\n"))
	f.Add([]byte(`{"version":3,"sources":["a.ts","b.ts"],"sourceRoot":"src/","mappings":";;AAAA;ACAA,CAAC"}`), []byte("\n\nx\ny z\n"))
	f.Add([]byte(`{"version":3,"sections":[]}`), []byte("x"))
	f.Add([]byte(`not json`), []byte(""))
	f.Fuzz(func(t *testing.T, data, gen []byte) {
		if len(gen) > 1<<14 {
			return
		}
		sm, err := parseSourceMap("file:///w/out/app.js.map", data, gen)
		if err != nil {
			return
		}
		lines := bytes.Split(gen, []byte("\n"))
		for path, byLine := range sm.back {
			for line, p := range byLine {
				if p.line < 1 || p.line > len(lines) || p.col < 0 || p.col > len(lines[p.line-1]) {
					t.Fatalf("%s:%d maps to %+v, outside the generated text", path, line, p)
				}
				got, gl, ok := sm.original(p.line, p.col)
				if !ok || got != path || gl != line {
					t.Fatalf("%s:%d -> %+v -> %s:%d (%v): not the way back", path, line, p, got, gl, ok)
				}
				if _, l, ok := sm.generated(path, line); !ok || l != line {
					t.Fatalf("generated(%s, %d) = %d, %v", path, line, l, ok)
				}
			}
		}
	})
}

func FuzzHitCondition(f *testing.F) {
	for _, s := range []string{"3", ">= 2", "%2", "== 0", "<5", "x", "% 0", "99999999999999999999"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, hits int) {
		h, err := parseHitCondition(s)
		if err != nil {
			return
		}
		_ = h.met(hits)
		if strings.TrimSpace(s) == "" && !h.met(hits) {
			t.Fatal("an empty hit condition must always stop")
		}
	})
}
