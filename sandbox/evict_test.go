//go:build !windows

package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

func TestEvictionRemovesInTierOrderKeepsPinnedAndSavesDirty(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var pressure atomic.Bool
	origin := makeOrigin(t, nil)
	other := makeOrigin(t, nil)
	e := newEnv(t, func(c *sandbox.Config) {
		c.Now = clock.Now
		c.Evict.Pressure = pressure.Load
	})
	ctx := context.Background()
	base := sandbox.AcquireRequest{Repo: origin, UserID: "u", ProjectID: "p"}
	with := func(mode, key string) sandbox.AcquireRequest {
		r := base
		r.Mode = mode
		switch mode {
		case sandbox.ModeEdit:
			r.ConversationID = key
		case sandbox.ModeTask:
			r.TaskID = key
		}
		return r
	}
	analysis := e.acquire(with(sandbox.ModeAnalysis, ""))
	taskClean := e.acquire(with(sandbox.ModeTask, "t-clean"))
	editClean := e.acquire(with(sandbox.ModeEdit, "e-clean"))
	taskDirty := e.acquire(with(sandbox.ModeTask, "t-dirty"))
	editDirty := e.acquire(with(sandbox.ModeEdit, "e-dirty"))
	pinReq := with(sandbox.ModeEdit, "e-pinned")
	pin := true
	pinReq.Pinned = &pin
	pinned := e.acquire(pinReq)
	gone := e.acquire(sandbox.AcquireRequest{Repo: other, Mode: sandbox.ModeAnalysis, UserID: "u", ProjectID: "p2"})
	if err := e.svc.Destroy(ctx, gone.WorkspaceID); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []sandbox.AcquireResult{taskDirty, editDirty, pinned} {
		must[sandbox.StrReplaceResult](t)(e.svc.StrReplace(ctx, ws.WorkspaceID, sandbox.StrReplaceRequest{Path: "README.md", Old: "demo", New: "changed"}))
		must[sandbox.WriteFileResult](t)(e.svc.WriteFile(ctx, ws.WorkspaceID, sandbox.WriteFileRequest{Path: "untracked/new.txt", Content: "brand new\n"}))
	}

	// Young: only nothing is due.
	res := must[sandbox.EvictResult](t)(e.svc.Evict(ctx, sandbox.EvictRequest{}))
	if len(res.Actions) != 0 {
		t.Fatalf("evicted young things: %+v", res.Actions)
	}

	clock.Advance(60 * 24 * time.Hour)
	dry := must[sandbox.EvictResult](t)(e.svc.Evict(ctx, sandbox.EvictRequest{DryRun: true}))
	if _, err := os.Stat(analysis.Path); err != nil {
		t.Fatal("a dry run removed a workspace")
	}

	res = must[sandbox.EvictResult](t)(e.svc.Evict(ctx, sandbox.EvictRequest{}))
	if len(dry.Actions) != len(res.Actions) {
		t.Fatalf("dry run planned %d actions, eviction did %d", len(dry.Actions), len(res.Actions))
	}
	var got []string
	lastTier := 0
	for _, a := range res.Actions {
		if a.Error != "" {
			t.Fatalf("action failed: %+v", a)
		}
		if a.Tier < lastTier {
			t.Fatalf("tier %d after tier %d: %+v", a.Tier, lastTier, res.Actions)
		}
		lastTier = a.Tier
		if a.Kind != "runtime" {
			got = append(got, a.ID)
		}
	}
	want := []string{analysis.WorkspaceID, taskClean.WorkspaceID, editClean.WorkspaceID, cacheKeyOf(t, other)}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("without pressure evicted %v, want %v", got, want)
	}
	if res.Actions[0].Kind != "runtime" {
		t.Fatalf("runtimes are not first: %+v", res.Actions)
	}
	for _, ws := range []sandbox.AcquireResult{taskDirty, editDirty, pinned} {
		if _, err := os.Stat(ws.Path); err != nil {
			t.Fatalf("a dirty or pinned workspace went without pressure: %v", err)
		}
	}

	pressure.Store(true)
	res = must[sandbox.EvictResult](t)(e.svc.Evict(ctx, sandbox.EvictRequest{}))
	got = nil
	for _, a := range res.Actions {
		got = append(got, a.ID)
		if !a.Dirty || a.Artifact == "" {
			t.Fatalf("dirty eviction without an artifact: %+v", a)
		}
		patch, err := os.ReadFile(a.Artifact)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(patch), "+# changed") || !strings.Contains(string(patch), "+brand new") {
			t.Fatalf("artifact misses the tracked or the untracked change:\n%s", patch)
		}
	}
	if want := []string{taskDirty.WorkspaceID, editDirty.WorkspaceID}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("under pressure evicted %v, want %v (dirty task before dirty edit)", got, want)
	}
	if _, err := os.Stat(pinned.Path); err != nil {
		t.Fatal("the pinned workspace was evicted")
	}
	if _, err := os.Stat(filepath.Join(e.root, "repos", "local")); err != nil {
		t.Fatal("the cache of a live workspace was evicted")
	}

	// The record remembers the artifact; a re-acquire makes a fresh worktree.
	_, err := e.svc.ReadFile(ctx, editDirty.WorkspaceID, sandbox.ReadFileRequest{Path: "README.md"})
	wantCode(t, err, protocol.CodeWorkspaceNotFound)
	if !strings.Contains(err.Error(), ".patch") {
		t.Fatalf("the error does not name the artifact: %v", err)
	}
	again := e.acquire(with(sandbox.ModeEdit, "e-dirty"))
	if !again.Created || again.Artifact == "" {
		t.Fatalf("re-acquire after eviction: %+v", again)
	}
}

// cacheKeyOf returns the repo key a repository URL is cached under.
func cacheKeyOf(t *testing.T, url string) string {
	t.Helper()
	r, err := sandbox.ParseRepo(url)
	if err != nil {
		t.Fatal(err)
	}
	return r.Key()
}
