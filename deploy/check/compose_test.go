package check

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
)

// TestComposeFile loads deploy/compose/compose.yaml as docker compose does
// (compose-go, with the specification's schema: an unknown key fails) and
// checks what the brokers need: three of them with their own instance ids,
// a stop grace above the broker's bounded shutdown, SIGTERM, no
// capabilities, a read-only root, and only variables and flags tether has.
func TestComposeFile(t *testing.T) {
	t.Setenv("TETHER_IMAGE", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	opts, err := cli.NewProjectOptions([]string{"../compose/compose.yaml"}, cli.WithName("tether"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	ids := map[string]bool{}
	brokers := 0
	for name, svc := range p.Services {
		if !strings.HasPrefix(name, "broker-") {
			continue
		}
		brokers++
		where := "compose.yaml " + name
		if len(svc.Command) == 0 || svc.Command[0] != "broker" {
			t.Errorf("%s: command %v, want tether broker …", where, svc.Command)
		} else {
			checkArgs(t, where, "broker", svc.Command[1:])
		}
		for k := range svc.Environment {
			checkEnv(t, where, k)
		}
		id := svc.Environment["TETHER_INSTANCE_ID"]
		if id == nil || *id == "" || ids[*id] {
			t.Errorf("%s: TETHER_INSTANCE_ID missing or shared", where)
		} else {
			ids[*id] = true
		}
		if svc.StopGracePeriod == nil || time.Duration(*svc.StopGracePeriod) <= brokerShutdownBound*time.Second {
			t.Errorf("%s: stop_grace_period %v, want more than the broker's %d s shutdown bound", where, svc.StopGracePeriod, brokerShutdownBound)
		}
		if svc.StopSignal != "SIGTERM" {
			t.Errorf("%s: stop_signal %q, want SIGTERM (the broker drains on it)", where, svc.StopSignal)
		}
		if !svc.ReadOnly || len(svc.CapDrop) != 1 || svc.CapDrop[0] != "ALL" {
			t.Errorf("%s: read_only %v, cap_drop %v; want a read-only root and every capability dropped", where, svc.ReadOnly, svc.CapDrop)
		}
	}
	if brokers != 3 {
		t.Errorf("compose.yaml has %d brokers, want 3", brokers)
	}
	for _, need := range []string{"redis", "haproxy"} {
		if _, ok := p.Services[need]; !ok {
			t.Errorf("compose.yaml has no %s service", need)
		}
	}
}
