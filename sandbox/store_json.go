//go:build !windows

package sandbox

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// JSONStore is the Store kept in one JSON file. Every change rewrites the
// file atomically (temporary file, fsync, rename, fsync of the directory),
// so a crash leaves the old or the new state, never a torn one.
type JSONStore struct {
	path string

	mu      sync.Mutex
	state   storeState
	touched bool // Touch changed state since the last write
}

type storeState struct {
	Version    int                   `json:"version"`
	Workspaces map[string]Record     `json:"workspaces"`
	Repos      map[string]RepoRecord `json:"repos"`
}

var _ Store = (*JSONStore)(nil)

// OpenJSONStore loads the store at path, or starts an empty one if the
// file does not exist.
func OpenJSONStore(path string) (*JSONStore, error) {
	s := &JSONStore{path: path, state: storeState{Version: 1, Workspaces: map[string]Record{}, Repos: map[string]RepoRecord{}}}
	data, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("reading the sandbox store: %w", err)
	}
	if err := json.Unmarshal(data, &s.state); err != nil {
		return nil, fmt.Errorf("decoding the sandbox store %s: %w", path, err)
	}
	if s.state.Workspaces == nil {
		s.state.Workspaces = map[string]Record{}
	}
	if s.state.Repos == nil {
		s.state.Repos = map[string]RepoRecord{}
	}
	return s, nil
}

func (s *JSONStore) Workspace(id string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.state.Workspaces[id]
	return r, ok
}

func (s *JSONStore) PutWorkspace(rec Record) error {
	return s.update(func(st *storeState) { st.Workspaces[rec.ID] = rec })
}

func (s *JSONStore) DeleteWorkspace(id string) error {
	return s.update(func(st *storeState) { delete(st.Workspaces, id) })
}

// Workspaces lists the records ordered by id.
func (s *JSONStore) Workspaces() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedValues(s.state.Workspaces)
}

func (s *JSONStore) Repo(key string) (RepoRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.state.Repos[key]
	return r, ok
}

func (s *JSONStore) PutRepo(rec RepoRecord) error {
	return s.update(func(st *storeState) { st.Repos[rec.Repo.Key()] = rec })
}

func (s *JSONStore) DeleteRepo(key string) error {
	return s.update(func(st *storeState) { delete(st.Repos, key) })
}

// Repos lists the repo records ordered by key.
func (s *JSONStore) Repos() []RepoRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedValues(s.state.Repos)
}

// sortedValues returns m's values ordered by key.
func sortedValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// Touch updates last-used times in memory only; the next write or Flush
// persists them.
func (s *JSONStore) Touch(id string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.state.Workspaces[id]
	if !ok {
		return
	}
	r.LastUsed = t
	s.state.Workspaces[id] = r
	if rr, ok := s.state.Repos[r.Repo.Key()]; ok {
		rr.LastUsed = t
		s.state.Repos[r.Repo.Key()] = rr
	}
	s.touched = true
}

// Flush writes the state if Touch changed it.
func (s *JSONStore) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.touched {
		return nil
	}
	return s.writeLocked()
}

func (s *JSONStore) update(f func(*storeState)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Apply to a copy so a failed write leaves memory matching the file.
	next := storeState{Version: s.state.Version, Workspaces: maps.Clone(s.state.Workspaces), Repos: maps.Clone(s.state.Repos)}
	f(&next)
	prev := s.state
	s.state = next
	if err := s.writeLocked(); err != nil {
		s.state = prev
		return err
	}
	return nil
}

// writeLocked holds the lock across the file write: the store file is
// small and local, and writing it in order is what keeps it consistent.
func (s *JSONStore) writeLocked() error {
	data, err := json.MarshalIndent(s.state, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the sandbox store: %w", err)
	}
	dir := filepath.Dir(s.path)
	f, err := os.CreateTemp(dir, ".store-*.tmp")
	if err != nil {
		return fmt.Errorf("writing the sandbox store: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing the sandbox store: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing the sandbox store: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the sandbox store: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("replacing the sandbox store: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // makes the rename durable
		d.Close()
	}
	s.touched = false
	return nil
}
