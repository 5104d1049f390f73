package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tetherdev/tether/protocol"
)

// File operations on a tree (a workspace's worktree). Each opens the tree
// as an os.Root (tree.open), so a path can never reach outside it,
// whatever symlinks it crosses.

// Defaults of the file operations.
const (
	DefaultReadCap    = 1 << 20
	maxListEntries    = 5000
	EncodingBase64    = "base64"
	defaultListDepth  = 1
	maxListDepth      = 20
	maxWriteFileBytes = 32 << 20
)

// ReadFileRequest is the payload of read-file. Lines are 1-based and
// inclusive; zero means the start or the end of the file.
type ReadFileRequest struct {
	Path      string `json:"path"`
	StartLine int    `json:"start_line,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	// Encoding "base64" returns the raw bytes base64-encoded. A file that
	// is not UTF-8 is returned so even when not asked.
	Encoding string `json:"encoding,omitempty"`
}

// ReadFileResult answers read-file.
type ReadFileResult struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	Encoding   string `json:"encoding,omitempty"`
	Size       int64  `json:"size"`
	TotalLines int    `json:"total_lines,omitempty"`
	// Truncated: the file (or the line range) was larger than the cap.
	Truncated bool `json:"truncated"`
}

// WriteFileRequest is the payload of write-file. Missing parent
// directories are created.
type WriteFileRequest struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
}

// WriteFileResult answers write-file.
type WriteFileResult struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// StrReplaceRequest is the payload of str-replace: Old must occur exactly
// once.
type StrReplaceRequest struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// StrReplaceResult answers str-replace.
type StrReplaceResult struct {
	Path string `json:"path"`
	Line int    `json:"line"` // where Old started
}

// ListDirRequest is the payload of list-dir.
type ListDirRequest struct {
	Path  string `json:"path"`
	Depth int    `json:"depth,omitempty"` // default 1
}

// DirEntry is one entry of list-dir; Path is relative to the worktree.
type DirEntry struct {
	Path string `json:"path"`
	Type string `json:"type"` // file, dir, symlink, other
	Size int64  `json:"size"`
}

// ListDirResult answers list-dir.
type ListDirResult struct {
	Path      string     `json:"path"`
	Entries   []DirEntry `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// PathRequest is the payload of stat and exists.
type PathRequest struct {
	Path string `json:"path"`
}

// StatResult answers stat.
type StatResult struct {
	Path    string    `json:"path"`
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"`
	ModTime time.Time `json:"mod_time"`
}

// ExistsResult answers exists.
type ExistsResult struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Type   string `json:"type,omitempty"`
}

// MkdirRequest is the payload of mkdir.
type MkdirRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// RmRequest is the payload of rm.
type RmRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
	Force     bool   `json:"force,omitempty"`
}

// PathResult answers mkdir and rm.
type PathResult struct {
	Path string `json:"path"`
}

// tree is one directory tree the file and search operations act on: a
// workspace's worktree. Its methods may be called concurrently; each
// opens the directory afresh, so a tree that is removed and made again
// (an evicted workspace acquired anew) is seen as it is now.
type tree struct {
	dir     string
	readCap int
	engine  searcher
}

// Whether an operation only reads the tree or changes it; see open.
const (
	reading = false
	writing = true
)

// open checks the path p an agent gave (CleanPath, or cleanWritablePath
// when write) and opens the tree as an os.Root to resolve it in. It
// returns the root, which the caller closes, and p relative to it.
func (t *tree) open(p string, write bool) (*os.Root, string, error) {
	clean := CleanPath
	if write {
		clean = cleanWritablePath
	}
	rel, err := clean(p)
	if err != nil {
		return nil, "", err
	}
	r, err := os.OpenRoot(t.dir)
	if err != nil {
		return nil, "", protocol.Errorf(protocol.CodeWorkspaceNotFound, "the workspace directory is missing: %v", err)
	}
	return r, rel, nil
}

// ReadFile reads a file of the tree.
func (t *tree) ReadFile(_ context.Context, req ReadFileRequest) (ReadFileResult, error) {
	root, rel, err := t.open(req.Path, reading)
	if err != nil {
		return ReadFileResult{}, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return ReadFileResult{}, pathError("read", rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ReadFileResult{}, pathError("read", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return ReadFileResult{}, protocol.Errorf(protocol.CodeInvalidPath, "read %s: not a regular file", rel)
	}
	res := ReadFileResult{Path: rel, Size: fi.Size()}
	ranged := req.StartLine > 0 || req.EndLine > 0
	limit := int64(t.readCap)
	if ranged {
		limit = 64 << 20 // a range may sit deep in a big file; the result is capped below
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return ReadFileResult{}, pathError("read", rel, err)
	}
	if int64(len(data)) > limit {
		data, res.Truncated = data[:limit], true
	}
	binary := req.Encoding == EncodingBase64 || !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0
	if binary {
		if ranged {
			return ReadFileResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "read %s: line ranges apply to text files only", rel)
		}
		res.Encoding = EncodingBase64
		res.Content = base64.StdEncoding.EncodeToString(data)
		return res, nil
	}
	text := string(data)
	if ranged {
		lines := strings.SplitAfter(text, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		res.TotalLines = len(lines)
		start, end := max(req.StartLine, 1), req.EndLine
		if end <= 0 || end > len(lines) {
			end = len(lines)
		}
		if start > end {
			text = ""
		} else {
			text = strings.Join(lines[start-1:end], "")
		}
		if len(text) > t.readCap {
			text, res.Truncated = strings.ToValidUTF8(text[:t.readCap], ""), true
		}
	}
	res.Content = text
	return res, nil
}

func decodeContent(content, encoding string) ([]byte, error) {
	switch encoding {
	case "", "utf-8", "utf8":
		return []byte(content), nil
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(content)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "content is not valid base64: %v", err)
		}
		return b, nil
	default:
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "encoding %q: use base64 or leave it empty", encoding)
	}
}

// WriteFile writes a file of the tree, creating missing parent
// directories.
func (t *tree) WriteFile(_ context.Context, req WriteFileRequest) (WriteFileResult, error) {
	root, rel, err := t.open(req.Path, writing)
	if err != nil {
		return WriteFileResult{}, err
	}
	defer root.Close()
	data, err := decodeContent(req.Content, req.Encoding)
	if err != nil {
		return WriteFileResult{}, err
	}
	if len(data) > maxWriteFileBytes {
		return WriteFileResult{}, protocol.Errorf(protocol.CodePayloadTooLarge, "write %s: more than %d bytes", rel, maxWriteFileBytes)
	}
	if d := path.Dir(rel); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return WriteFileResult{}, pathError("write", rel, err)
		}
	}
	if err := writeInRoot(root, rel, data); err != nil {
		return WriteFileResult{}, err
	}
	return WriteFileResult{Path: rel, Bytes: len(data)}, nil
}

// writeInRoot replaces rel's contents, keeping the mode of an existing
// file.
func writeInRoot(root *os.Root, rel string, data []byte) error {
	mode := fs.FileMode(0o644)
	if fi, err := root.Stat(rel); err == nil {
		if !fi.Mode().IsRegular() {
			return protocol.Errorf(protocol.CodeInvalidPath, "write %s: not a regular file", rel)
		}
		mode = fi.Mode().Perm()
	}
	if err := root.WriteFile(rel, data, mode); err != nil {
		return pathError("write", rel, err)
	}
	return nil
}

// StrReplace replaces the one occurrence of req.Old in a file of the
// tree.
func (t *tree) StrReplace(_ context.Context, req StrReplaceRequest) (StrReplaceResult, error) {
	root, rel, err := t.open(req.Path, writing)
	if err != nil {
		return StrReplaceResult{}, err
	}
	defer root.Close()
	if req.Old == "" {
		return StrReplaceResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "old must not be empty")
	}
	data, err := root.ReadFile(rel)
	if err != nil {
		return StrReplaceResult{}, pathError("str-replace", rel, err)
	}
	text := string(data)
	switch n := strings.Count(text, req.Old); n {
	case 0:
		return StrReplaceResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "str-replace %s: the old text does not occur", rel)
	case 1:
	default:
		return StrReplaceResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "str-replace %s: the old text occurs %d times; include more context to make it unique", rel, n)
	}
	i := strings.Index(text, req.Old)
	line := strings.Count(text[:i], "\n") + 1
	if err := writeInRoot(root, rel, []byte(text[:i]+req.New+text[i+len(req.Old):])); err != nil {
		return StrReplaceResult{}, err
	}
	return StrReplaceResult{Path: rel, Line: line}, nil
}

func typeOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return "other"
	}
}

// ListDir lists a directory of the tree, depth levels down.
func (t *tree) ListDir(_ context.Context, req ListDirRequest) (ListDirResult, error) {
	root, rel, err := t.open(req.Path, reading)
	if err != nil {
		return ListDirResult{}, err
	}
	defer root.Close()
	depth := req.Depth
	if depth <= 0 {
		depth = defaultListDepth
	}
	depth = min(depth, maxListDepth)
	// Resolve the start through the root first: a symlinked directory
	// leading out fails here.
	if fi, err := root.Stat(rel); err != nil {
		return ListDirResult{}, pathError("list", rel, err)
	} else if !fi.IsDir() {
		return ListDirResult{}, protocol.Errorf(protocol.CodeInvalidPath, "list %s: not a directory", rel)
	}
	res := ListDirResult{Path: rel, Entries: []DirEntry{}}
	base := strings.Count(rel, "/")
	if rel == "." {
		base = -1
	}
	err = fs.WalkDir(root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == rel {
				return err
			}
			return nil // an unreadable entry is skipped, not fatal
		}
		if p == rel {
			return nil
		}
		if len(res.Entries) >= maxListEntries {
			res.Truncated = true
			return fs.SkipAll
		}
		e := DirEntry{Path: p, Type: typeOf(d.Type())}
		if info, err := d.Info(); err == nil && d.Type().IsRegular() {
			e.Size = info.Size()
		}
		res.Entries = append(res.Entries, e)
		if d.IsDir() && (d.Name() == ".git" || strings.Count(p, "/")-base >= depth) {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return ListDirResult{}, pathError("list", rel, err)
	}
	return res, nil
}

// Stat describes a path of the tree (what a symlink leads to, when that
// stays inside).
func (t *tree) Stat(_ context.Context, req PathRequest) (StatResult, error) {
	root, rel, err := t.open(req.Path, reading)
	if err != nil {
		return StatResult{}, err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// Report what the link leads to, if that stays inside.
		if t, terr := root.Stat(rel); terr == nil {
			fi = t
		} else {
			return StatResult{}, pathError("stat", rel, terr)
		}
	}
	if err != nil {
		return StatResult{}, pathError("stat", rel, err)
	}
	return StatResult{Path: rel, Type: typeOf(fi.Mode()), Size: fi.Size(), Mode: fi.Mode().String(), ModTime: fi.ModTime().UTC()}, nil
}

// Exists reports whether a path of the tree exists.
func (t *tree) Exists(ctx context.Context, req PathRequest) (ExistsResult, error) {
	st, err := t.Stat(ctx, req)
	if err != nil {
		var fe *fileError
		if errors.As(err, &fe) && errors.Is(err, fs.ErrNotExist) {
			rel, _ := CleanPath(req.Path)
			return ExistsResult{Path: rel}, nil
		}
		return ExistsResult{}, err
	}
	return ExistsResult{Path: st.Path, Exists: true, Type: st.Type}, nil
}

// Mkdir creates a directory in the tree.
func (t *tree) Mkdir(_ context.Context, req MkdirRequest) (PathResult, error) {
	root, rel, err := t.open(req.Path, writing)
	if err != nil {
		return PathResult{}, err
	}
	defer root.Close()
	if req.Recursive {
		err = root.MkdirAll(rel, 0o755)
	} else {
		err = root.Mkdir(rel, 0o755)
	}
	if err != nil {
		return PathResult{}, pathError("mkdir", rel, err)
	}
	return PathResult{Path: rel}, nil
}

// Rm removes a path of the tree.
func (t *tree) Rm(_ context.Context, req RmRequest) (PathResult, error) {
	root, rel, err := t.open(req.Path, writing)
	if err != nil {
		return PathResult{}, err
	}
	defer root.Close()
	if _, err := root.Lstat(rel); err != nil {
		if req.Force && errors.Is(err, fs.ErrNotExist) {
			return PathResult{Path: rel}, nil
		}
		return PathResult{}, pathError("rm", rel, err)
	}
	if req.Recursive {
		err = root.RemoveAll(rel)
	} else {
		err = root.Remove(rel)
	}
	if err != nil {
		return PathResult{}, pathError("rm", rel, err)
	}
	return PathResult{Path: rel}, nil
}
