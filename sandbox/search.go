package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// SearchRequest is the payload of search.
type SearchRequest struct {
	// Pattern is a regular expression (Rust regex syntax with ripgrep, Go
	// RE2 syntax without it; they agree on the common subset), or a plain
	// string with Fixed.
	Pattern string `json:"pattern"`
	// Path limits the search to a file or directory of the worktree.
	Path            string `json:"path,omitempty"`
	Fixed           bool   `json:"fixed,omitempty"`
	CaseInsensitive bool   `json:"case_insensitive,omitempty"`
	// Glob limits the files searched, e.g. "*.go".
	Glob string `json:"glob,omitempty"`
	// MaxResults bounds the hits; default 1000, at most 10000.
	MaxResults int `json:"max_results,omitempty"`
}

// SearchHit is one matching line.
type SearchHit struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// SearchResult answers search.
type SearchResult struct {
	Hits      []SearchHit `json:"hits"`
	Truncated bool        `json:"truncated"`
	// Engine is "rg" or "go".
	Engine string `json:"engine"`
}

const (
	defaultSearchResults = 1000
	maxSearchResults     = 10000
	maxHitText           = 500
	maxSearchFileBytes   = 4 << 20
)

// searcher searches worktrees with ripgrep when it is installed, else in
// Go. Both skip .git; ripgrep also honours .gitignore.
type searcher struct {
	rg string // absolute path of rg, "" for the Go fallback
}

func newSearcher(bin string) searcher {
	if bin == "" {
		bin = "rg"
	}
	if bin == "-" {
		return searcher{}
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return searcher{}
	}
	return searcher{rg: p}
}

// Search searches the tree's files, with ripgrep when it is installed.
func (t *tree) Search(ctx context.Context, req SearchRequest) (SearchResult, error) {
	if req.Pattern == "" {
		return SearchResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "pattern is required")
	}
	root, rel, err := t.open(req.Path, reading)
	if err != nil {
		return SearchResult{}, err
	}
	defer root.Close()
	if strings.ContainsAny(req.Glob, "\x00\n") {
		return SearchResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "bad glob")
	}
	limit := req.MaxResults
	if limit <= 0 {
		limit = defaultSearchResults
	}
	limit = min(limit, maxSearchResults)
	// The start must resolve inside the worktree (a symlink leading out
	// fails here); neither engine follows symlinks below it.
	if _, err := root.Stat(rel); err != nil {
		return SearchResult{}, pathError("search", rel, err)
	}
	if t.engine.rg != "" {
		return t.engine.ripgrep(ctx, t.dir, rel, req, limit)
	}
	return goSearch(ctx, root, rel, req, limit)
}

func (s searcher) ripgrep(ctx context.Context, dir, rel string, req SearchRequest, limit int) (SearchResult, error) {
	args := []string{"--json", "--no-config", "--no-messages", "--hidden", "--glob", "!.git"}
	if req.Fixed {
		args = append(args, "--fixed-strings")
	}
	if req.CaseInsensitive {
		args = append(args, "--ignore-case")
	}
	if req.Glob != "" {
		args = append(args, "--glob", req.Glob)
	}
	args = append(args, "--regexp", req.Pattern, "--", rel)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.rg, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return SearchResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return SearchResult{}, fmt.Errorf("starting rg: %w", err)
	}
	res := SearchResult{Hits: []SearchHit{}, Engine: "rg"}
	br := bufio.NewReaderSize(out, 64<<10)
	var ev rgEvent
	for {
		line, rerr := br.ReadSlice('\n')
		if len(line) > 0 && bytes.HasPrefix(line, []byte(`{"type":"match"`)) {
			ev = rgEvent{}
			if json.Unmarshal(line, &ev) == nil {
				if len(res.Hits) >= limit {
					res.Truncated = true
					cancel()
					break
				}
				res.Hits = append(res.Hits, SearchHit{
					Path: strings.TrimPrefix(ev.Data.Path.text(), "./"),
					Line: ev.Data.LineNumber,
					Text: clipLine(strings.TrimRight(ev.Data.Lines.text(), "\r\n")),
				})
			}
		}
		if rerr == bufio.ErrBufferFull {
			// A line longer than the buffer: drain it; it is not a match
			// event we can use.
			for rerr == bufio.ErrBufferFull {
				_, rerr = br.ReadSlice('\n')
			}
		}
		if rerr != nil {
			break
		}
	}
	_, _ = io.Copy(io.Discard, out)
	err = cmd.Wait()
	var exitErr *exec.ExitError
	switch {
	case res.Truncated:
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.ExitCode() == 1: // no match
	case ctx.Err() != nil:
		return SearchResult{}, ctx.Err()
	default:
		return SearchResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "rg: %s", strings.TrimSpace(stderr.String()))
	}
	return res, nil
}

type rgText struct {
	Text  *string `json:"text"`
	Bytes string  `json:"bytes"`
}

func (t rgText) text() string {
	if t.Text != nil {
		return *t.Text
	}
	return t.Bytes // base64 of non-UTF-8 data; rare, shown as is
}

type rgEvent struct {
	Data struct {
		Path       rgText `json:"path"`
		Lines      rgText `json:"lines"`
		LineNumber int    `json:"line_number"`
	} `json:"data"`
}

func clipLine(s string) string {
	if len(s) > maxHitText {
		return strings.ToValidUTF8(s[:maxHitText], "") + "…"
	}
	return s
}

func goSearch(ctx context.Context, root *os.Root, rel string, req SearchRequest, limit int) (SearchResult, error) {
	pat := req.Pattern
	if req.Fixed {
		pat = regexp.QuoteMeta(pat)
	}
	if req.CaseInsensitive {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return SearchResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "pattern: %v", err)
	}
	res := SearchResult{Hits: []SearchHit{}, Engine: "go"}
	fsys := root.FS()
	err = fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if req.Glob != "" {
			if ok, _ := path.Match(req.Glob, d.Name()); !ok {
				return nil
			}
		}
		if info, err := d.Info(); err != nil || info.Size() > maxSearchFileBytes {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			return nil
		}
		if !re.Match(data) {
			return nil
		}
		for i, line := range strings.Split(string(data), "\n") {
			if re.MatchString(line) {
				if len(res.Hits) >= limit {
					res.Truncated = true
					return fs.SkipAll
				}
				res.Hits = append(res.Hits, SearchHit{Path: p, Line: i + 1, Text: clipLine(strings.TrimRight(line, "\r"))})
			}
		}
		return nil
	})
	if err != nil {
		return SearchResult{}, err
	}
	return res, nil
}
