//go:build !windows

package dap_test

import (
	"encoding/json"
	"testing"

	"github.com/tetherdev/tether/dap"
)

const launchWithComments = `{
  // line comment
  "version": "0.2.0",
  "configurations": [
    {
      "name": "C", /* block comment */
      "type": "cppdbg",
      "request": "launch",
      "program": "${workspaceFolder}/bin/app",
      "args": ["${file}", "--home=${env:TETHER_TEST_HOME}", "${command:pickProcess}"],
      "cwd": "${workspaceFolder}",
    },
    "not an object",
  ],
}`

func TestLaunchJSONCommentsTrailingCommasAndVariables(t *testing.T) {
	vars := dap.Vars{WorkspaceFolder: "/ws", File: "src/main.c", Env: func(k string) string {
		if k == "TETHER_TEST_HOME" {
			return "/home/x"
		}
		return ""
	}}
	cfgs, err := dap.ParseLaunchJSON([]byte(launchWithComments), vars)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs) != 1 {
		t.Fatalf("configs = %+v, want the one object", cfgs)
	}
	c := cfgs[0]
	if c.Name() != "C" || c.Type() != "cppdbg" || c["program"] != "/ws/bin/app" || c["cwd"] != "/ws" {
		t.Fatalf("config = %+v", c)
	}
	args := c["args"].([]any)
	want := []any{"/ws/src/main.c", "--home=/home/x", "${command:pickProcess}"}
	for i := range want {
		if args[i] != want[i] {
			t.Errorf("args[%d] = %v, want %v", i, args[i], want[i])
		}
	}
}

func TestLaunchJSONMalformedIsAnError(t *testing.T) {
	for _, in := range []string{`{"configurations": [`, `[1, 2]`, `{"configurations": 3}`} {
		if _, err := dap.ParseLaunchJSON([]byte(in), dap.Vars{}); err == nil {
			t.Errorf("%q parsed without error", in)
		}
	}
}

func FuzzLaunchJSON(f *testing.F) {
	for _, s := range []string{
		launchWithComments,
		`{}`,
		`{"configurations": []}`,
		`{"configurations": [{"name": "${env:X}${workspaceFolder}${"}]}`,
		`{"configurations": [{"a": {"b": ["${file}", 1, null, true]}}],}`,
		"/* */ {\"configurations\": [{\"x\": \"${}\"}]} // end",
	} {
		f.Add([]byte(s))
	}
	vars := dap.Vars{WorkspaceFolder: "/ws", File: "f.c", Env: func(string) string { return "E" }}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfgs, err := dap.ParseLaunchJSON(data, vars)
		if err != nil {
			return
		}
		for _, c := range cfgs {
			if c == nil {
				t.Fatal("nil configuration")
			}
			if _, err := json.Marshal(c); err != nil {
				t.Fatalf("configuration does not re-encode: %v", err)
			}
			_ = c.Name()
			_ = c.Type()
		}
	})
}
