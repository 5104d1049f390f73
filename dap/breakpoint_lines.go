//go:build !windows

package dap

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tetherdev/tether/protocol"
)

// Breakpoints by line content: models miscount lines, so a source
// breakpoint may give the text of its line (line_content) instead of its
// number. This file owns that rule for every adapter; the adapter only ever
// sees line numbers.

// maxLineFile bounds the source file read to find a line_content.
const maxLineFile = 16 << 20

// maxListedLines bounds how many candidate lines an ambiguity error lists.
const maxListedLines = 20

// checkLines checks that each breakpoint gives exactly one of line and
// line_content, and occurrence only with line_content. field names the
// list in messages ("breakpoints", "breakpoints[0].breakpoints").
func checkLines(field string, bps []SourceBreakpoint) error {
	for i, b := range bps {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case b.Line != 0 && b.LineContent != "":
			return protocol.Errorf(protocol.CodeInvalidPayload, "%s: give line or line_content, not both", at)
		case b.LineContent != "":
			if strings.TrimSpace(b.LineContent) == "" {
				return protocol.Errorf(protocol.CodeInvalidPayload, "%s.line_content is blank", at)
			}
			if b.Occurrence < 0 {
				return protocol.Errorf(protocol.CodeInvalidPayload, "%s.occurrence must be 1 or more, got %d", at, b.Occurrence)
			}
		case b.Line < 0:
			return protocol.Errorf(protocol.CodeInvalidPayload, "%s.line must be positive, got %d", at, b.Line)
		case b.Line == 0:
			return protocol.Errorf(protocol.CodeInvalidPayload, "%s: give line or line_content", at)
		case b.Occurrence != 0:
			return protocol.Errorf(protocol.CodeInvalidPayload, "%s.occurrence goes with line_content, not line", at)
		}
	}
	return nil
}

// resolveLines returns bps with every line_content replaced by the line it
// names in path (taken from root like any breakpoint path, and read only
// inside root). bps itself is not changed; with no line_content it is
// returned as it is, and no file is read.
func resolveLines(root, path, field string, bps []SourceBreakpoint) ([]SourceBreakpoint, error) {
	if err := checkLines(field, bps); err != nil {
		return nil, err
	}
	var src []byte
	var out []SourceBreakpoint
	for i, b := range bps {
		if b.LineContent == "" {
			continue
		}
		if src == nil {
			var err error
			if src, err = readInRoot(root, path); err != nil {
				return nil, err
			}
			out = append([]SourceBreakpoint(nil), bps...)
		}
		line, err := lineOf(src, b.LineContent, b.Occurrence)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "%s[%d].line_content: %v in %s", field, i, err, path)
		}
		out[i].Line, out[i].LineContent, out[i].Occurrence = line, "", 0
	}
	if out == nil {
		return bps, nil
	}
	return out, nil
}

// readInRoot reads path (absolute, or relative to root) if it lies inside
// root, symbolic links included.
func readInRoot(root, path string) ([]byte, error) {
	rel, err := filepath.Rel(root, absIn(root, path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, protocol.Errorf(protocol.CodeInvalidPath, "line_content needs a file inside the workspace, and %s is not", path)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("opening the workspace: %w", err)
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	if err == nil && fi.Size() > maxLineFile {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "%s is larger than %d MiB; give line instead of line_content", path, maxLineFile>>20)
	}
	var data []byte
	if err == nil {
		data, err = r.ReadFile(rel)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, protocol.Errorf(protocol.CodeInvalidPath, "line_content: no file %s in the workspace", path)
	}
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidPath, "line_content: reading %s: %v", path, err)
	}
	return data, nil
}

// lineOf finds the 1-based line of src whose trimmed text equals the
// trimmed text; failing that, the lines containing it. One match is the
// answer; several need occurrence (1-based) to choose, else the error lists
// them so the caller can.
func lineOf(src []byte, text string, occurrence int) (int, error) {
	want := strings.TrimSpace(text)
	var exact, containing []int
	for n, line := range bytes.Split(src, []byte("\n")) {
		line = bytes.TrimSpace(line) // also drops a CRLF file's \r
		if string(line) == want {
			exact = append(exact, n+1)
		} else if bytes.Contains(line, []byte(want)) {
			containing = append(containing, n+1)
		}
	}
	matches, how := exact, "matches"
	if len(matches) == 0 {
		matches, how = containing, "is contained in"
	}
	switch {
	case len(matches) == 0:
		return 0, fmt.Errorf("no line matches or contains %q", want)
	case occurrence > len(matches):
		return 0, fmt.Errorf("occurrence %d asked, but %q %s only %d lines (%s)", occurrence, want, how, len(matches), listLines(matches))
	case occurrence > 0:
		return matches[occurrence-1], nil
	case len(matches) > 1:
		return 0, fmt.Errorf("%q %s %d lines (%s); give occurrence (1-based) or line", want, how, len(matches), listLines(matches))
	}
	return matches[0], nil
}

func listLines(lines []int) string {
	var b strings.Builder
	b.WriteString("lines ")
	for i, n := range lines {
		if i == maxListedLines {
			fmt.Fprintf(&b, " and %d more", len(lines)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}
