//go:build !windows

package sandbox

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// File operations on a Tree (read-file is in read.go). Each opens the
// tree as an os.Root (Tree.open), so a path can never reach outside it,
// whatever symlinks it crosses.

// PathRequest is the payload of stat, exists and readdir.
type PathRequest struct {
	Path string `json:"path"`
}

// StatResult answers stat. For a symlink whose target stays inside the
// tree, IsSymlink is set and the rest describes the target.
type StatResult struct {
	Path        string    `json:"path"`
	Type        string    `json:"type"` // file, dir, symlink, other
	IsDirectory bool      `json:"is_directory"`
	IsSymlink   bool      `json:"is_symlink"`
	Size        int64     `json:"size"`
	Mode        string    `json:"mode"`
	ModTime     time.Time `json:"mod_time"`
	MtimeMS     int64     `json:"mtime_ms"` // ModTime in Unix milliseconds
}

// ReaddirResult answers readdir: the names in a directory, sorted, .git
// included; at most 5000, with Truncated set beyond.
type ReaddirResult struct {
	Path      string   `json:"path"`
	Names     []string `json:"names"`
	Truncated bool     `json:"truncated"`
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
func (t *Tree) WriteFile(_ context.Context, req WriteFileRequest) (WriteFileResult, error) {
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
	if d := path.Dir(rel); d != "." && (req.CreateDirs == nil || *req.CreateDirs) {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return WriteFileResult{}, pathError("write", rel, err)
		}
	}
	_, statErr := root.Lstat(rel)
	if err := writeInRoot(root, rel, data); err != nil {
		return WriteFileResult{}, err
	}
	return WriteFileResult{Path: rel, Bytes: len(data), Created: errors.Is(statErr, fs.ErrNotExist)}, nil
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

// StrReplace replaces the occurrences of req.Old in a file of the tree;
// see StrReplaceRequest.
func (t *Tree) StrReplace(_ context.Context, req StrReplaceRequest) (StrReplaceResult, error) {
	root, rel, err := t.open(req.Path, writing)
	if err != nil {
		return StrReplaceResult{}, err
	}
	defer root.Close()
	if req.Old == "" {
		return StrReplaceResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "old must not be empty")
	}
	want := req.ExpectedCount
	if want < 0 {
		return StrReplaceResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "expected_count %d must be positive", want)
	}
	if want == 0 {
		want = 1
	}
	f, fi, _, err := t.openFile(req.Path, "str-replace")
	if err != nil {
		return StrReplaceResult{}, err
	}
	defer f.Close()
	switch {
	case !fi.Mode().IsRegular():
		return StrReplaceResult{}, protocol.Errorf(protocol.CodeInvalidPath, "str-replace %s: not a regular file", rel)
	case fi.Size() > maxWriteFileBytes:
		return StrReplaceResult{}, protocol.Errorf(protocol.CodePayloadTooLarge, "str-replace %s: the file is over %d bytes", rel, maxWriteFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxWriteFileBytes+1))
	if err != nil {
		return StrReplaceResult{}, pathError("str-replace", rel, err)
	}
	text := string(data)
	switch n := strings.Count(text, req.Old); {
	case n == 0:
		return StrReplaceResult{}, protocol.Errorf(protocol.CodeNoMatch, "str-replace %s: the old text occurs 0 times (expected_count %d); read the file again and copy the text exactly", rel, want)
	case n != want:
		return StrReplaceResult{}, protocol.Errorf(protocol.CodeAmbiguousMatch, "str-replace %s: the old text occurs %d times, expected_count is %d; include more context to make it unique, or set expected_count to %d to replace them all", rel, n, want, n)
	}
	line := strings.Count(text[:strings.Index(text, req.Old)], "\n") + 1
	if err := writeInRoot(root, rel, []byte(strings.ReplaceAll(text, req.Old, req.New))); err != nil {
		return StrReplaceResult{}, err
	}
	return StrReplaceResult{Path: rel, Replacements: want, Line: line}, nil
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
func (t *Tree) ListDir(_ context.Context, req ListDirRequest) (ListDirResult, error) {
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

// Stat describes a path of the tree; see StatResult.
func (t *Tree) Stat(_ context.Context, req PathRequest) (StatResult, error) {
	root, rel, err := t.open(req.Path, reading)
	if err != nil {
		return StatResult{}, err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err != nil {
		return StatResult{}, pathError("stat", rel, err)
	}
	link := fi.Mode()&fs.ModeSymlink != 0
	if link {
		// Report what the link leads to, if that stays inside.
		if fi, err = root.Stat(rel); err != nil {
			return StatResult{}, pathError("stat", rel, err)
		}
	}
	mt := fi.ModTime().UTC()
	return StatResult{
		Path: rel, Type: typeOf(fi.Mode()), IsDirectory: fi.IsDir(), IsSymlink: link,
		Size: fi.Size(), Mode: fi.Mode().String(), ModTime: mt, MtimeMS: mt.UnixMilli(),
	}, nil
}

// Readdir lists the names in a directory of the tree; see ReaddirResult.
func (t *Tree) Readdir(_ context.Context, req PathRequest) (ReaddirResult, error) {
	f, fi, rel, err := t.openFile(req.Path, "readdir")
	if err != nil {
		return ReaddirResult{}, err
	}
	defer f.Close()
	if !fi.IsDir() {
		return ReaddirResult{}, protocol.Errorf(protocol.CodeInvalidPath, "readdir %s: not a directory", rel)
	}
	names, err := f.Readdirnames(maxListEntries + 1)
	if err != nil && err != io.EOF {
		return ReaddirResult{}, pathError("readdir", rel, err)
	}
	res := ReaddirResult{Path: rel}
	if len(names) > maxListEntries {
		names, res.Truncated = names[:maxListEntries], true
	}
	slices.Sort(names)
	res.Names = append([]string{}, names...)
	return res, nil
}

// Exists reports whether a path of the tree exists.
func (t *Tree) Exists(ctx context.Context, req PathRequest) (ExistsResult, error) {
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
func (t *Tree) Mkdir(_ context.Context, req MkdirRequest) (PathResult, error) {
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
func (t *Tree) Rm(_ context.Context, req RmRequest) (PathResult, error) {
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
