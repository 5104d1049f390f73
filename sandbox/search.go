//go:build !windows

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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tetherdev/tether/protocol"
)

const (
	defaultSearchResults = 1000
	maxSearchResults     = 10000
	maxSearchContext     = 10
	maxHitText           = 500
	maxSearchFileBytes   = 4 << 20
	maxRenderedBytes     = 192 << 10 // Rendered, and the hits again: under the broker's 1 MB
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
func (t *Tree) Search(ctx context.Context, req SearchRequest) (SearchResult, error) {
	if req.Pattern == "" {
		return SearchResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "pattern is required")
	}
	root, rel, err := t.open(req.Path, reading)
	if err != nil {
		return SearchResult{}, err
	}
	defer root.Close()
	if strings.ContainsAny(req.Glob, "\x00\n") {
		return SearchResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "glob: contains a NUL byte or a newline")
	}
	if req.Context < 0 || req.Context > maxSearchContext {
		return SearchResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "context %d: use 0 to %d lines", req.Context, maxSearchContext)
	}
	req.Fixed = req.Fixed || req.Literal
	limit := req.MaxResults
	if limit <= 0 {
		limit = defaultSearchResults
	}
	limit = min(limit, maxSearchResults)
	// The start must resolve inside the worktree (a symlink leading out
	// fails here); neither engine follows symlinks below it.
	if fi, err := root.Stat(rel); err != nil {
		return SearchResult{}, pathError("search", rel, err)
	} else if !fi.IsDir() && !fi.Mode().IsRegular() {
		// ripgrep would read a FIFO named here until a writer came.
		return SearchResult{}, protocol.Errorf(protocol.CodeInvalidPath, "search %s: not a file or directory", rel)
	}
	c := &hitCollector{context: req.Context, limit: limit}
	var engine string
	if t.engine.rg != "" {
		engine, err = "rg", t.engine.ripgrep(ctx, t.dir, rel, req, c.add)
	} else {
		engine, err = "go", goSearch(ctx, root, rel, req, c.add)
	}
	if err != nil {
		return SearchResult{}, err
	}
	return SearchResult{Hits: c.hits, Rendered: c.out.String(), Truncated: c.truncated, Engine: engine}, nil
}

// searchLine is a line an engine found: a hit, or a context line.
// Engines hand them over in file order, each file's lines in line order.
type searchLine struct {
	path  string
	line  int
	text  string
	match bool
}

// hitCollector turns the lines the engines find into hits and their
// rendering, up to the limits.
type hitCollector struct {
	context, limit int

	hits      []SearchHit
	out       strings.Builder
	truncated bool
	file      string // the file of the lines coming in
	// Context lines of file since its last hit, the latest context of
	// them (a line after one hit may be before the next).
	pending  []pendingLine
	lastHit  int // index in hits of file's last hit, -1 none
	lastPath string
	lastLine int // the line last rendered, in lastPath
}

type pendingLine struct {
	searchLine
	rendered bool
}

// add takes the next line; it returns false once the limits are reached
// and the engine should stop.
func (c *hitCollector) add(l searchLine) bool {
	if c.hits == nil {
		c.hits, c.lastHit = []SearchHit{}, -1
	}
	if l.path != c.file {
		c.file, c.pending, c.lastHit = l.path, c.pending[:0], -1
	}
	if !l.match {
		p := pendingLine{searchLine: l}
		if c.lastHit >= 0 && l.line-c.hits[c.lastHit].Line <= c.context {
			h := &c.hits[c.lastHit]
			h.After = append(h.After, l.text)
			c.render(l)
			p.rendered = true
		}
		c.pending = append(c.pending, p)
		if len(c.pending) > c.context {
			c.pending = c.pending[len(c.pending)-c.context:]
		}
		return true
	}
	if len(c.hits) >= c.limit || c.out.Len() >= maxRenderedBytes {
		c.truncated = true
		return false
	}
	h := SearchHit{Path: l.path, Line: l.line, Text: l.text}
	for _, p := range c.pending {
		if p.line >= l.line-c.context && p.line < l.line {
			h.Before = append(h.Before, p.text)
			if !p.rendered {
				c.render(p.searchLine)
			}
		}
	}
	c.pending = c.pending[:0]
	c.render(l)
	c.hits = append(c.hits, h)
	c.lastHit = len(c.hits) - 1
	return true
}

func (c *hitCollector) render(l searchLine) {
	if c.out.Len() > 0 && (l.path != c.lastPath || l.line != c.lastLine+1) {
		c.out.WriteString("--\n")
	}
	sep := "-"
	if l.match {
		sep = ":"
	}
	fmt.Fprintf(&c.out, "%s%s%d%s %s\n", l.path, sep, l.line, sep, l.text)
	c.lastPath, c.lastLine = l.path, l.line
}

func (s searcher) ripgrep(ctx context.Context, dir, rel string, req SearchRequest, emit func(searchLine) bool) error {
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
	if req.Context > 0 {
		args = append(args, "--context", strconv.Itoa(req.Context))
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
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting rg: %w", err)
	}
	stopped := false
	br := bufio.NewReaderSize(out, 64<<10)
	var ev rgEvent
	for {
		line, rerr := br.ReadSlice('\n')
		match := bytes.HasPrefix(line, []byte(`{"type":"match"`))
		if len(line) > 0 && (match || bytes.HasPrefix(line, []byte(`{"type":"context"`))) {
			ev = rgEvent{}
			if json.Unmarshal(line, &ev) == nil && !emit(searchLine{
				path:  strings.TrimPrefix(ev.Data.Path.text(), "./"),
				line:  ev.Data.LineNumber,
				text:  clipLine(strings.TrimRight(ev.Data.Lines.text(), "\r\n")),
				match: match,
			}) {
				stopped = true
				cancel()
				break
			}
		}
		if rerr == bufio.ErrBufferFull {
			// A line longer than the buffer: drain it; it is not an event
			// we can use.
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
	case stopped:
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.ExitCode() == 1: // no match
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return protocol.Errorf(protocol.CodeInvalidPayload, "rg: %s", strings.TrimSpace(stderr.String()))
	}
	return nil
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

func goSearch(ctx context.Context, root *os.Root, rel string, req SearchRequest, emit func(searchLine) bool) error {
	pat := req.Pattern
	if req.Fixed {
		pat = regexp.QuoteMeta(pat)
	}
	if req.CaseInsensitive {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return protocol.Errorf(protocol.CodeInvalidPayload, "pattern: %v", err)
	}
	fsys := root.FS()
	return fs.WalkDir(fsys, rel, func(p string, d fs.DirEntry, err error) error {
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
		lines := strings.Split(string(data), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		// shown[i]: line i is a hit or within Context lines of one.
		shown := make([]bool, len(lines))
		matched := make([]bool, len(lines))
		for i, line := range lines {
			if re.MatchString(line) {
				matched[i] = true
				for j := max(i-req.Context, 0); j <= min(i+req.Context, len(lines)-1); j++ {
					shown[j] = true
				}
			}
		}
		for i, line := range lines {
			if shown[i] && !emit(searchLine{path: p, line: i + 1, text: clipLine(strings.TrimRight(line, "\r")), match: matched[i]}) {
				return fs.SkipAll
			}
		}
		return nil
	})
}
