package chaos

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// maxShown bounds the violations the summary describes one by one.
const maxShown = 20

// report writes the run's summary: calls, outcomes, faults, the checks'
// figures and every violation (the first maxShown with the faults around
// the call and an excerpt of the logs).
func (r *run) report(w io.Writer, v verdict, took time.Duration) {
	r.mu.Lock()
	records, violations := r.records, r.violations
	r.mu.Unlock()
	fmt.Fprintf(w, "chaos run %s: %s\n", r.id, r.cfg)
	var byWay [ways]int
	var byAct [acts]int
	outcomes := map[string]int{}
	for _, rec := range records {
		byWay[rec.way]++
		byAct[rec.act]++
		outcomes[r.outcomes[rec.outcome]]++
	}
	fmt.Fprintf(w, "  calls: %d in %s (%.0f/s); ", len(records), took.Round(time.Millisecond), float64(len(records))/took.Seconds())
	for i, n := range byWay {
		fmt.Fprintf(w, "%s %d ", way(i), n)
	}
	fmt.Fprint(w, "· acts: ")
	for i, n := range byAct {
		fmt.Fprintf(w, "%s %d ", act(i), n)
	}
	fmt.Fprintf(w, "\n  outcomes: %s\n", counts(outcomes))
	fmt.Fprintf(w, "  clean calls (no fault on their path): %d, failed %d; touched by a fault or their own act: %d\n", v.clean, v.cleanFailed, v.touched)
	fmt.Fprintf(w, "  latest answer past its deadline: %s (bound %s); later ones while the host stalled: %d\n", v.maxLate.Round(time.Millisecond), lateBound, v.lateExcused)
	fmt.Fprintf(w, "  calls delivered to clients (reported by them): %d; answers published to inboxes (spy): %d; disconnections: %d\n", v.delivered, v.replies, v.disconnects)
	fmt.Fprintf(w, "  tool_cancel due to clients for calls given up on a clean path: %d, received %d\n", v.cancelsDue, v.cancelsSeen)
	fmt.Fprintf(w, "  async: requests tried again after a fault %d; keyed submits sent again and answered by their call %d; cancels %d; records lost to a Redis restart %d (delivered again after it %d); outcomes late while Redis was down %d\n",
		r.asyncRetries.Load(), r.asyncResubmits.Load(), r.asyncCancels.Load(), v.asyncLost, v.redeliveredLost, v.asyncLateRedis)
	faults := r.faults.all()
	kinds := map[string]int{}
	var stalls int
	var stalled, longest time.Duration
	for _, f := range faults {
		if f.scope == scopeHost {
			stalls++
			stalled += f.stall
			longest = max(longest, f.stall)
			continue
		}
		kinds[f.kind]++
	}
	fmt.Fprintf(w, "  faults injected: %d: %s\n", len(faults)-stalls, counts(kinds))
	fmt.Fprintf(w, "  host stalls observed (this process not scheduled for over %s): %d, %s in all, the longest %s\n",
		stallGap, stalls, stalled.Round(time.Millisecond), longest.Round(time.Millisecond))
	byKind := map[string]int{}
	for _, x := range violations {
		byKind[x.kind]++
	}
	fmt.Fprintf(w, "  violations: %d %s\n", len(violations), counts(byKind))
	ix := newFaultIndex(faults)
	for i, x := range violations {
		if i == maxShown {
			fmt.Fprintf(w, "  … and %d more\n", len(violations)-maxShown)
			break
		}
		fmt.Fprintf(w, "\n  [%s] %s\n", x.kind, x.detail)
		if !x.hasSeq {
			continue
		}
		cid := r.cid(x.seq)
		fmt.Fprintf(w, "    correlation id %s\n", cid)
		if x.seq < uint64(len(records)) && records[x.seq].finished {
			rec := records[x.seq]
			ws := r.topo.spaces[rec.ws]
			s := span{ws: ws.idx, owner: ws.owner, entry: int(rec.entry), from: r.start.Add(rec.sent), to: r.start.Add(rec.done)}
			fmt.Fprintf(w, "    %s call to %s (%s), sent %s, answered %s (%s)\n", rec.way, ws.id, rec.act,
				s.from.Format("15:04:05.000"), s.to.Format("15:04:05.000"), r.outcomes[rec.outcome])
			near := span{ws: s.ws, owner: s.owner, entry: s.entry, from: s.from.Add(-10 * time.Second), to: s.to.Add(10 * time.Second)}
			for _, f := range ix.touching(near) {
				fmt.Fprintf(w, "    fault nearby: %s on %s %s–%s %s %s\n", f.kind, f.target, f.start.Format("15:04:05.000"), f.end.Format("15:04:05.000"), f.note, f.failed)
			}
		}
		for line := range strings.SplitSeq(r.topo.logExcerpt(cid, 12), "\n") {
			fmt.Fprintf(w, "    | %.400s\n", line)
		}
	}
}

// counts renders a count per name, largest first.
func counts(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if m[names[i]] != m[names[j]] {
			return m[names[i]] > m[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, " · ")
}

// writeFaultLog writes every fault, one line each, for the run's records.
func (r *run) writeFaultLog(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	for _, x := range r.faults.all() {
		fmt.Fprintf(f, "%s %s %-14s %-24s %s %s\n", x.start.Format("15:04:05.000"), x.end.Format("15:04:05.000"), x.kind, x.target, x.note, x.failed)
	}
	return f.Close()
}
