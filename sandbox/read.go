//go:build !windows

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/tetherdev/tether/protocol"
)

// read-file: a text file is read line by line, so a line range deep in a
// big file costs no memory beyond what is returned, and the line count
// comes with it; anything else is returned as base64 bytes.

const (
	// maxScanBytes is how far a text read goes to count lines or reach a
	// range.
	maxScanBytes = 64 << 20
	// sniffBytes is how much of a file decides whether it is text, as git
	// and ripgrep decide.
	sniffBytes = 8000
)

// errNotText is what readLines returns on a line that is not text.
var errNotText = errors.New("not a text file")

// ReadFile reads a file of the tree; see ReadFileRequest.
func (t *Tree) ReadFile(ctx context.Context, req ReadFileRequest) (ReadFileResult, error) {
	if err := req.check(); err != nil {
		return ReadFileResult{}, err
	}
	f, fi, rel, err := t.openFile(req.Path, "read")
	if err != nil {
		return ReadFileResult{}, err
	}
	defer f.Close()
	if !fi.Mode().IsRegular() {
		return ReadFileResult{}, protocol.Errorf(protocol.CodeInvalidPath, "read %s: not a regular file", rel)
	}
	budget := t.readCap
	if req.MaxBytes > 0 {
		budget = min(req.MaxBytes, budget)
	}
	res := ReadFileResult{Path: rel, Size: fi.Size()}
	lineMode := req.StartLine > 0 || req.EndLine > 0 || req.LineNumbers
	notText := func() (ReadFileResult, error) {
		return ReadFileResult{}, protocol.Errorf(protocol.CodeInvalidPayload,
			"read %s: not a text file (a NUL byte, or not UTF-8): start_line, end_line and line_numbers apply to text only; read it with encoding base64", rel)
	}
	if req.Encoding == EncodingBase64 {
		return readRaw(f, budget, res, rel)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(sniffBytes) // Peek's error is the read's, met again below
	if !isText(head, len(head) < sniffBytes) {
		if lineMode {
			return notText()
		}
		return readRaw(br, budget, res, rel)
	}
	if err := readLines(ctx, br, req, budget, &res); err != nil {
		if !errors.Is(err, errNotText) {
			if ctx.Err() != nil {
				return ReadFileResult{}, ctx.Err()
			}
			return ReadFileResult{}, pathError("read", rel, err)
		}
		if lineMode {
			return notText()
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return ReadFileResult{}, pathError("read", rel, err)
		}
		return readRaw(f, budget, ReadFileResult{Path: rel, Size: fi.Size()}, rel)
	}
	return res, nil
}

func (r *ReadFileRequest) check() error {
	switch {
	case r.StartLine < 0:
		return protocol.Errorf(protocol.CodeInvalidPayload, "start_line %d: lines count from 1", r.StartLine)
	case r.EndLine < 0:
		return protocol.Errorf(protocol.CodeInvalidPayload, "end_line %d: lines count from 1", r.EndLine)
	case r.EndLine > 0 && r.StartLine > r.EndLine:
		return protocol.Errorf(protocol.CodeInvalidPayload, "start_line %d is after end_line %d", r.StartLine, r.EndLine)
	case r.MaxBytes < 0:
		return protocol.Errorf(protocol.CodeInvalidPayload, "max_bytes %d must not be negative", r.MaxBytes)
	}
	switch r.Encoding {
	case "", "utf-8", "utf8":
	case EncodingBase64:
		if r.StartLine > 0 || r.EndLine > 0 || r.LineNumbers {
			return protocol.Errorf(protocol.CodeInvalidPayload, "encoding base64 reads bytes: start_line, end_line and line_numbers apply to text")
		}
	default:
		return protocol.Errorf(protocol.CodeInvalidPayload, "encoding %q: use base64 or leave it empty", r.Encoding)
	}
	return nil
}

// readRaw returns up to budget bytes of r, base64-encoded.
func readRaw(r io.Reader, budget int, res ReadFileResult, rel string) (ReadFileResult, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(budget)+1))
	if err != nil {
		return ReadFileResult{}, pathError("read", rel, err)
	}
	if len(data) > budget {
		data, res.Truncated = data[:budget], true
	}
	res.Encoding = EncodingBase64
	res.Content = base64.StdEncoding.EncodeToString(data)
	return res, nil
}

// isText reports whether b holds no NUL byte and is UTF-8; unless
// complete, b may end inside a rune (a chunk cut from a longer stream).
func isText(b []byte, complete bool) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	if !complete {
		b = trimPartialRune(b)
	}
	return utf8.Valid(b)
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// readLines fills res from the text in br: the lines of req's range, as
// many as budget allows, and the line count. A line of the range that is
// not text answers errNotText.
func readLines(ctx context.Context, br *bufio.Reader, req ReadFileRequest, budget int, res *ReadFileResult) error {
	start, end := max(req.StartLine, 1), req.EndLine
	out := make([]byte, 0, min(budget, 64<<10))
	var (
		line       []byte
		n          int   // lines read
		scanned    int64 // bytes read
		collecting = true
		eof        bool
	)
	for scanned <= maxScanBytes {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		var whole int
		var err error
		line, whole, err = readLine(br, budget, line)
		if err != nil && err != io.EOF {
			return err
		}
		if whole == 0 {
			eof = true
			break
		}
		n++
		scanned += int64(whole)
		if n >= start && (end == 0 || n <= end) && collecting {
			complete := whole == len(line)
			if !isText(line, complete) {
				return errNotText
			}
			var prefix []byte
			if req.LineNumbers {
				prefix = fmt.Appendf(nil, "%6d\t", n)
			}
			switch {
			case complete && len(out)+len(prefix)+len(line) <= budget:
				out = append(append(out, prefix...), line...)
				res.EndLine = n
			case len(out) == 0:
				// The first line alone is over the budget: as much of it
				// as fits, so a one-line file still shows something.
				room := max(budget-len(prefix), 0)
				out = append(out, prefix...)
				out = append(out, trimPartialRune(line[:min(room, len(line))])...)
				res.EndLine, res.Truncated, collecting = n, true, false
			default:
				res.Truncated, collecting = true, false
			}
		}
		if err == io.EOF {
			eof = true
			break
		}
	}
	if eof {
		res.TotalLines = n
	} else if collecting && (end == 0 || n < end) {
		res.Truncated = true // the scan stopped before the range's end
	}
	if res.EndLine > 0 {
		res.StartLine = start
	}
	res.Content = string(out)
	return nil
}

// readLine reads one line, its '\n' included, from br into buf (reused),
// keeping at most keep bytes of it; whole is the line's full length, 0 at
// the end of the input. err is nil, io.EOF for a last line without '\n',
// or a read error.
func readLine(br *bufio.Reader, keep int, buf []byte) (line []byte, whole int, err error) {
	buf = buf[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		whole += len(chunk)
		if room := keep - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return buf, whole, err
	}
}
