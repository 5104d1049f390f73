package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/buildinfo"
)

func TestVersionJSONPrintsTheBuildInfoAsOneObject(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("tether version --json exited %d: %s", code, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	var got buildinfo.Info
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("tether version --json: %v", err)
	}
	if dec.More() {
		t.Fatal("tether version --json printed more than one JSON value")
	}
	if want := buildinfo.Get(); got != want {
		t.Errorf("tether version --json printed %+v, want %+v", got, want)
	}
}

func TestVersionPrintsOneLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("tether version exited %d: %s", code, stderr.String())
	}
	if want := "tether " + buildinfo.Get().String() + "\n"; stdout.String() != want {
		t.Errorf("tether version printed %q, want %q", stdout.String(), want)
	}
}

func TestVersionRefusesUnknownFlagsAndArguments(t *testing.T) {
	for _, args := range [][]string{{"version", "--yaml"}, {"version", "extra"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("tether %s exited %d, want 2 (a usage error)", strings.Join(args, " "), code)
		}
		if stdout.Len() != 0 {
			t.Errorf("tether %s printed %q on stdout, want nothing", strings.Join(args, " "), stdout.String())
		}
	}
}
