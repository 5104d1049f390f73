//go:build !windows

package node

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-sourcemap/sourcemap"
)

// Source maps, for TypeScript (tsc --sourceMap) and other compiled
// JavaScript. Decoding is github.com/go-sourcemap/sourcemap's; it maps a
// generated position to its original one only, so the way back (a
// breakpoint on a .ts line → a position in the .js) is an index built here
// by asking it about every generated column once per script.

// maxMapFile bounds a source map or generated file read from disk.
const maxMapFile = 32 << 20

// pos is a 1-based line and 0-based column.
type pos struct{ line, col int }

// sourceMap is one generated script's map, both ways.
type sourceMap struct {
	c *sourcemap.Consumer
	// back maps an original path to its lines, each to the earliest
	// generated position that maps to it.
	back map[string]map[int]pos
}

// loadSourceMap reads the map of the script at scriptURL whose
// sourceMappingURL is mapURL (relative to the script, absolute, or a data:
// URL), and indexes it over the generated file's text.
func loadSourceMap(scriptURL, mapURL string) (*sourceMap, error) {
	scriptPath, ok := urlToPath(scriptURL)
	if !ok {
		return nil, fmt.Errorf("script %s is not a file", scriptURL)
	}
	var data []byte
	var base string
	if rest, ok := strings.CutPrefix(mapURL, "data:"); ok {
		comma := strings.IndexByte(rest, ',')
		if comma < 0 || !strings.HasSuffix(rest[:comma], ";base64") {
			return nil, fmt.Errorf("unsupported inline source map")
		}
		b, err := base64.StdEncoding.DecodeString(rest[comma+1:])
		if err != nil {
			return nil, fmt.Errorf("decoding the inline source map: %w", err)
		}
		data, base = b, pathToURL(scriptPath)
	} else {
		ref, err := url.Parse(mapURL)
		if err != nil {
			return nil, fmt.Errorf("source map URL %q: %w", mapURL, err)
		}
		abs := (&url.URL{Scheme: "file", Path: scriptPath}).ResolveReference(ref)
		p, ok := urlToPath(abs.String())
		if !ok {
			return nil, fmt.Errorf("source map %s is not a file", abs)
		}
		if data, err = readBounded(p); err != nil {
			return nil, err
		}
		base = pathToURL(p)
	}
	gen, err := readBounded(scriptPath)
	if err != nil {
		return nil, err
	}
	return parseSourceMap(base, data, gen)
}

// parseSourceMap parses a map (whose own URL is base) for the generated
// text gen and builds the way back.
func parseSourceMap(base string, data, gen []byte) (*sourceMap, error) {
	c, err := sourcemap.Parse(base, data)
	if err != nil {
		return nil, fmt.Errorf("parsing the source map %s: %w", base, err)
	}
	m := &sourceMap{c: c, back: map[string]map[int]pos{}}
	for i, line := range bytes.Split(gen, []byte("\n")) {
		last := ""
		lastLine := -1
		for col := 0; col <= len(line); col++ {
			src, l, ok := lookup(c, i+1, col)
			if !ok || (src == last && l == lastLine) {
				continue
			}
			last, lastLine = src, l
			p, ok := urlToPath(src)
			if !ok {
				continue
			}
			lines := m.back[p]
			if lines == nil {
				lines = map[int]pos{}
				m.back[p] = lines
			}
			if _, seen := lines[l]; !seen {
				lines[l] = pos{i + 1, col}
			}
		}
	}
	return m, nil
}

// original maps a generated 1-based line and 0-based column to the original
// file path and 1-based line.
func (m *sourceMap) original(line, col int) (string, int, bool) {
	src, l, ok := lookup(m.c, line, col)
	if !ok {
		return "", 0, false
	}
	p, ok := urlToPath(src)
	return p, l, ok
}

// lookup asks the library for the original of a generated position. It
// panics on a mapping that names a source or name index the map does not
// list (found by FuzzSourceMap); such a position has no original.
func lookup(c *sourcemap.Consumer, line, col int) (src string, origLine int, ok bool) {
	defer func() {
		if recover() != nil {
			src, origLine, ok = "", 0, false
		}
	}()
	src, _, origLine, _, ok = c.Source(line, col)
	return src, origLine, ok
}

// generated maps an original path and 1-based line to the earliest
// generated position of that line, or of the next line that has code (a
// breakpoint on a comment binds where the code continues).
func (m *sourceMap) generated(path string, line int) (pos, int, bool) {
	lines := m.back[path]
	if len(lines) == 0 {
		return pos{}, 0, false
	}
	if p, ok := lines[line]; ok {
		return p, line, true
	}
	keys := slices.Sorted(func(yield func(int) bool) {
		for k := range lines {
			if !yield(k) {
				return
			}
		}
	})
	i, _ := slices.BinarySearch(keys, line)
	if i == len(keys) {
		return pos{}, 0, false
	}
	return lines[keys[i]], keys[i], true
}

// has reports whether the map has positions of path.
func (m *sourceMap) has(path string) bool { return len(m.back[path]) > 0 }

func readBounded(p string) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxMapFile {
		return nil, fmt.Errorf("%s is larger than %d MiB", p, maxMapFile>>20)
	}
	return os.ReadFile(p)
}

// urlToPath turns a file:// URL (or an absolute path, as CommonJS scripts
// are named by some Node versions) into a clean path.
func urlToPath(s string) (string, bool) {
	if filepath.IsAbs(s) {
		return filepath.Clean(s), true
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return "", false
	}
	return filepath.Clean(u.Path), true
}

func pathToURL(p string) string {
	return (&url.URL{Scheme: "file", Path: p}).String()
}
