//go:build !windows

package sandbox_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/gittest"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// newTree makes a directory holding files (name → content) and returns
// its Tree.
func newTree(t *testing.T, files map[string]string, opts sandbox.TreeOptions) (*sandbox.Tree, string) {
	t.Helper()
	dir := t.TempDir()
	gittest.WriteFiles(t, dir, files)
	tr, err := sandbox.NewTree(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr, dir
}

var bg = context.Background()

func TestTreeReadFileWithLineNumbersAndRange(t *testing.T) {
	tr, _ := newTree(t, map[string]string{"f.txt": "one\ntwo\nthree\nfour\n"}, sandbox.TreeOptions{})
	got := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "f.txt", StartLine: 2, EndLine: 3, LineNumbers: true}))
	if got.Content != "     2\ttwo\n     3\tthree\n" || got.StartLine != 2 || got.EndLine != 3 || got.TotalLines != 4 || got.Truncated {
		t.Fatalf("range with numbers: %+v", got)
	}
	whole := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "f.txt"}))
	if whole.Content != "one\ntwo\nthree\nfour\n" || whole.StartLine != 1 || whole.EndLine != 4 || whole.TotalLines != 4 || whole.Size != 19 {
		t.Fatalf("whole file: %+v", whole)
	}
	past := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "f.txt", StartLine: 9}))
	if past.Content != "" || past.StartLine != 0 || past.EndLine != 0 || past.TotalLines != 4 || past.Truncated {
		t.Fatalf("a start past the end: %+v", past)
	}
}

func TestTreeReadFileLastLineWithoutNewlineCounts(t *testing.T) {
	tr, _ := newTree(t, map[string]string{"f": "a\nb", "empty": ""}, sandbox.TreeOptions{})
	got := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "f", LineNumbers: true}))
	if got.Content != "     1\ta\n     2\tb" || got.TotalLines != 2 || got.EndLine != 2 {
		t.Fatalf("%+v", got)
	}
	empty := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "empty"}))
	if empty.Content != "" || empty.TotalLines != 0 || empty.StartLine != 0 || empty.Encoding != "" {
		t.Fatalf("empty file: %+v", empty)
	}
}

func TestTreeReadFileCapsAtMaxBytesOnALineBoundary(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&b, "line %04d\n", i) // 10 bytes a line
	}
	tr, _ := newTree(t, map[string]string{"big.txt": b.String()}, sandbox.TreeOptions{ReadCap: 95})
	got := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "big.txt"}))
	if !got.Truncated || got.Content != b.String()[:90] || got.EndLine != 9 || got.TotalLines != 1000 {
		t.Fatalf("ReadCap 95: truncated %v end %d total %d content %q", got.Truncated, got.EndLine, got.TotalLines, got.Content)
	}
	// max_bytes may lower the cap, not raise it.
	small := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "big.txt", StartLine: 500, MaxBytes: 25}))
	if small.Content != "line 0500\nline 0501\n" || small.StartLine != 500 || small.EndLine != 501 || !small.Truncated {
		t.Fatalf("max_bytes 25 from line 500: %+v", small)
	}
	big := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "big.txt", MaxBytes: 1 << 30}))
	if len(big.Content) != 90 {
		t.Fatalf("max_bytes above ReadCap returned %d bytes, want the cap's 90", len(big.Content))
	}
	fits := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "big.txt", StartLine: 999, EndLine: 1000}))
	if fits.Truncated || fits.Content != "line 0999\nline 1000\n" {
		t.Fatalf("a range that fits: %+v", fits)
	}
}

func TestTreeReadFileFirstLineLongerThanTheCapIsCut(t *testing.T) {
	line := strings.Repeat("é", 100) + "\n" // 201 bytes of two-byte runes
	tr, _ := newTree(t, map[string]string{"min.js": line + "next\n"}, sandbox.TreeOptions{ReadCap: 51})
	got := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "min.js"}))
	if !got.Truncated || got.Content != strings.Repeat("é", 25) || got.EndLine != 1 || got.TotalLines != 2 {
		t.Fatalf("cut first line: %+v", got)
	}
}

func TestTreeReadFileBinaryIsBase64AndRefusesLineOptions(t *testing.T) {
	bin := string([]byte{0x7f, 'E', 'L', 'F', 0, 1, 2, 0xff})
	tr, _ := newTree(t, map[string]string{"a.out": bin, "latin1.txt": "caf\xe9\n", "t.txt": "text\n"}, sandbox.TreeOptions{})
	for _, name := range []string{"a.out", "latin1.txt"} {
		got := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: name}))
		raw, _ := os.ReadFile(filepath.Join(tr.Dir(), name))
		if got.Encoding != sandbox.EncodingBase64 || got.Content != base64.StdEncoding.EncodeToString(raw) {
			t.Fatalf("%s: %+v", name, got)
		}
		_, err := tr.ReadFile(bg, sandbox.ReadFileRequest{Path: name, LineNumbers: true})
		wantCode(t, err, protocol.CodeInvalidPayload)
	}
	asked := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "t.txt", Encoding: "base64"}))
	if asked.Content != base64.StdEncoding.EncodeToString([]byte("text\n")) || asked.Encoding != "base64" {
		t.Fatalf("base64 asked for: %+v", asked)
	}
	for _, req := range []sandbox.ReadFileRequest{
		{Path: "t.txt", Encoding: "base64", StartLine: 1},
		{Path: "t.txt", Encoding: "latin1"},
		{Path: "t.txt", StartLine: -1},
		{Path: "t.txt", StartLine: 3, EndLine: 2},
		{Path: "t.txt", MaxBytes: -5},
	} {
		_, err := tr.ReadFile(bg, req)
		wantCode(t, err, protocol.CodeInvalidPayload)
	}
}

func TestTreeReadFileNotATextLineInTheRange(t *testing.T) {
	// Text for the first 8000 bytes, then a NUL: a line read answers so.
	content := strings.Repeat("abcdefghi\n", 900) + "bad\x00line\n"
	tr, _ := newTree(t, map[string]string{"f": content}, sandbox.TreeOptions{ReadCap: 1 << 20})
	_, err := tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "f", StartLine: 901})
	wantCode(t, err, protocol.CodeInvalidPayload)
	got := must[sandbox.ReadFileResult](t)(tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "f"}))
	if got.Encoding != "base64" {
		t.Fatalf("a file that turns binary was returned as text: %+v", got.Encoding)
	}
}

func TestTreeWriteFileBase64AndCreateDirs(t *testing.T) {
	tr, dir := newTree(t, nil, sandbox.TreeOptions{})
	raw := []byte{0, 1, 2, 0xfe, 0xff}
	w := must[sandbox.WriteFileResult](t)(tr.WriteFile(bg, sandbox.WriteFileRequest{Path: "deep/er/blob", Content: base64.StdEncoding.EncodeToString(raw), Encoding: "base64"}))
	if w.Bytes != 5 || !w.Created || w.Path != "deep/er/blob" {
		t.Fatalf("write: %+v", w)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "deep/er/blob")); err != nil || string(data) != string(raw) {
		t.Fatalf("on disk: %q %v", data, err)
	}
	again := must[sandbox.WriteFileResult](t)(tr.WriteFile(bg, sandbox.WriteFileRequest{Path: "deep/er/blob", Content: "x"}))
	if again.Created {
		t.Fatal("overwriting an existing file reported created")
	}
	no := false
	_, err := tr.WriteFile(bg, sandbox.WriteFileRequest{Path: "missing/f", Content: "x", CreateDirs: &no})
	wantCode(t, err, protocol.CodeInvalidPath)
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatal("create_dirs false created the parent")
	}
	_, err = tr.WriteFile(bg, sandbox.WriteFileRequest{Path: "f", Content: "!!", Encoding: "base64"})
	wantCode(t, err, protocol.CodeInvalidPayload)
}

func TestTreeStrReplaceExpectedCount(t *testing.T) {
	tr, dir := newTree(t, map[string]string{"f.go": "a := 1\nb := 1\nc := 2\n"}, sandbox.TreeOptions{})
	_, err := tr.StrReplace(bg, sandbox.StrReplaceRequest{Path: "f.go", Old: ":= 1", New: ":= 9"})
	wantCode(t, err, protocol.CodeAmbiguousMatch)
	if !strings.Contains(err.Error(), "occurs 2 times") {
		t.Fatalf("the message does not give the count: %v", err)
	}
	_, err = tr.StrReplace(bg, sandbox.StrReplaceRequest{Path: "f.go", Old: ":= 1", New: ":= 9", ExpectedCount: 3})
	wantCode(t, err, protocol.CodeAmbiguousMatch)
	_, err = tr.StrReplace(bg, sandbox.StrReplaceRequest{Path: "f.go", Old: ":= 7", New: ":= 9"})
	wantCode(t, err, protocol.CodeNoMatch)
	if !strings.Contains(err.Error(), "occurs 0 times") {
		t.Fatalf("the message does not give the count: %v", err)
	}
	_, err = tr.StrReplace(bg, sandbox.StrReplaceRequest{Path: "f.go", Old: "", New: "x"})
	wantCode(t, err, protocol.CodeInvalidPayload)
	_, err = tr.StrReplace(bg, sandbox.StrReplaceRequest{Path: "f.go", Old: "a", New: "x", ExpectedCount: -1})
	wantCode(t, err, protocol.CodeInvalidPayload)
	if data, _ := os.ReadFile(filepath.Join(dir, "f.go")); string(data) != "a := 1\nb := 1\nc := 2\n" {
		t.Fatalf("a refused replace changed the file: %q", data)
	}
	res := must[sandbox.StrReplaceResult](t)(tr.StrReplace(bg, sandbox.StrReplaceRequest{Path: "f.go", Old: ":= 1", New: ":= 9", ExpectedCount: 2}))
	if res.Replacements != 2 || res.Line != 1 {
		t.Fatalf("result %+v", res)
	}
	one := must[sandbox.StrReplaceResult](t)(tr.StrReplace(bg, sandbox.StrReplaceRequest{Path: "f.go", Old: "c := 2", New: "c := 3"}))
	if one.Replacements != 1 || one.Line != 3 {
		t.Fatalf("result %+v", one)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "f.go")); string(data) != "a := 9\nb := 9\nc := 3\n" {
		t.Fatalf("file after the replaces: %q", data)
	}
}

func TestTreeStatReaddirExistsMkdirRm(t *testing.T) {
	tr, dir := newTree(t, map[string]string{"src/a.go": "package a\n", "src/b.go": "package a\n", ".git/HEAD": "ref: x\n"}, sandbox.TreeOptions{})
	if err := os.Symlink("src", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	mt := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "src/a.go"), mt, mt); err != nil {
		t.Fatal(err)
	}
	st := must[sandbox.StatResult](t)(tr.Stat(bg, sandbox.PathRequest{Path: "src/a.go"}))
	if st.IsDirectory || st.IsSymlink || st.Size != 10 || st.MtimeMS != mt.UnixMilli() || st.Type != "file" {
		t.Fatalf("stat file: %+v", st)
	}
	ln := must[sandbox.StatResult](t)(tr.Stat(bg, sandbox.PathRequest{Path: "link"}))
	if !ln.IsSymlink || !ln.IsDirectory || ln.Type != "dir" {
		t.Fatalf("stat of a symlink to a directory: %+v", ln)
	}
	rd := must[sandbox.ReaddirResult](t)(tr.Readdir(bg, sandbox.PathRequest{}))
	if strings.Join(rd.Names, ",") != ".git,link,src" || rd.Truncated {
		t.Fatalf("readdir: %+v", rd)
	}
	_, err := tr.Readdir(bg, sandbox.PathRequest{Path: "src/a.go"})
	wantCode(t, err, protocol.CodeInvalidPath)
	ls := must[sandbox.ListDirResult](t)(tr.ListDir(bg, sandbox.ListDirRequest{Depth: 3}))
	for _, e := range ls.Entries {
		if strings.HasPrefix(e.Path, ".git/") {
			t.Fatalf("list-dir went into .git: %+v", ls.Entries)
		}
	}
	must[sandbox.PathResult](t)(tr.Mkdir(bg, sandbox.MkdirRequest{Path: "x/y/z", Recursive: true}))
	if ex := must[sandbox.ExistsResult](t)(tr.Exists(bg, sandbox.PathRequest{Path: "x/y/z"})); !ex.Exists || ex.Type != "dir" {
		t.Fatalf("exists after mkdir: %+v", ex)
	}
	_, err = tr.Rm(bg, sandbox.RmRequest{Path: "x"})
	if err == nil {
		t.Fatal("rm of a non-empty directory without recursive succeeded")
	}
	must[sandbox.PathResult](t)(tr.Rm(bg, sandbox.RmRequest{Path: "x", Recursive: true}))
	must[sandbox.PathResult](t)(tr.Rm(bg, sandbox.RmRequest{Path: "x", Force: true}))
	if ex := must[sandbox.ExistsResult](t)(tr.Exists(bg, sandbox.PathRequest{Path: "x"})); ex.Exists {
		t.Fatal("x exists after rm")
	}
}

func TestTreeReaddirAndListDirTruncate(t *testing.T) {
	tr, dir := newTree(t, nil, sandbox.TreeOptions{})
	for i := range 5001 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rd := must[sandbox.ReaddirResult](t)(tr.Readdir(bg, sandbox.PathRequest{}))
	if !rd.Truncated || len(rd.Names) != 5000 {
		t.Fatalf("readdir of 5001 names: %d names, truncated %v", len(rd.Names), rd.Truncated)
	}
	ls := must[sandbox.ListDirResult](t)(tr.ListDir(bg, sandbox.ListDirRequest{}))
	if !ls.Truncated || len(ls.Entries) != 5000 {
		t.Fatalf("list-dir of 5001 entries: %d, truncated %v", len(ls.Entries), ls.Truncated)
	}
}

// TestTreeRefusesPathsOutside runs every path-taking operation with
// every kind of escape; each must answer invalid_path and touch nothing.
func TestTreeRefusesPathsOutside(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, dir := newTree(t, map[string]string{"ok.txt": "fine\n"}, sandbox.TreeOptions{})
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "secret-link")); err != nil {
		t.Fatal(err)
	}
	paths := []string{"../x", "a/../../x", "/etc/passwd", "a\x00b", strings.Repeat("a/", 3000), "out/secret", "secret-link", "out"}
	ops := map[string]func(p string) error{
		"read-file": func(p string) error { _, err := tr.ReadFile(bg, sandbox.ReadFileRequest{Path: p}); return err },
		"write-file": func(p string) error {
			_, err := tr.WriteFile(bg, sandbox.WriteFileRequest{Path: p + "/new", Content: "x"})
			return err
		},
		"str-replace": func(p string) error {
			_, err := tr.StrReplace(bg, sandbox.StrReplaceRequest{Path: p, Old: "secret", New: "x"})
			return err
		},
		"list-dir": func(p string) error { _, err := tr.ListDir(bg, sandbox.ListDirRequest{Path: p}); return err },
		"stat":     func(p string) error { _, err := tr.Stat(bg, sandbox.PathRequest{Path: p}); return err },
		"readdir":  func(p string) error { _, err := tr.Readdir(bg, sandbox.PathRequest{Path: p}); return err },
		"mkdir": func(p string) error {
			_, err := tr.Mkdir(bg, sandbox.MkdirRequest{Path: p + "/d", Recursive: true})
			return err
		},
		"search": func(p string) error {
			_, err := tr.Search(bg, sandbox.SearchRequest{Pattern: "secret", Path: p})
			return err
		},
	}
	for name, op := range ops {
		for _, p := range paths {
			err := op(p)
			if codeOf(err) != protocol.CodeInvalidPath {
				t.Errorf("%s %q: %v, want invalid_path", name, p, err)
			}
		}
	}
	// rm removes a link itself (it is inside), never what it leads to.
	must[sandbox.PathResult](t)(tr.Rm(bg, sandbox.RmRequest{Path: "out", Recursive: true}))
	for _, p := range []string{"../x", "/tmp", "a\x00b", ".", ".git/config"} {
		_, err := tr.Rm(bg, sandbox.RmRequest{Path: p, Recursive: true, Force: true})
		wantCode(t, err, protocol.CodeInvalidPath)
	}
	if data, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(data) != "secret\n" {
		t.Fatalf("the file outside changed: %q %v", data, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("something was made outside: %v", entries)
	}
}

func TestTreeSearchContextAndRendered(t *testing.T) {
	files := map[string]string{
		"a.txt": "one\ntwo\nneedle 1\nthree\nfour\nfive\nsix\nneedle 2\nseven\n",
		"b.go":  "package b\n// needle in go\n",
	}
	for _, rg := range []string{"", "-"} {
		tr, _ := newTree(t, files, sandbox.TreeOptions{RgBin: rg})
		res := must[sandbox.SearchResult](t)(tr.Search(bg, sandbox.SearchRequest{Pattern: "needle", Literal: true, Glob: "*.txt", Context: 1}))
		if len(res.Hits) != 2 || res.Hits[0].Line != 3 || res.Hits[1].Line != 8 {
			t.Fatalf("%s: hits %+v", res.Engine, res.Hits)
		}
		h := res.Hits[0]
		if strings.Join(h.Before, "|") != "two" || strings.Join(h.After, "|") != "three" {
			t.Fatalf("%s: context of the first hit: %+v", res.Engine, h)
		}
		want := "a.txt-2- two\na.txt:3: needle 1\na.txt-4- three\n--\na.txt-7- six\na.txt:8: needle 2\na.txt-9- seven\n"
		if res.Rendered != want {
			t.Fatalf("%s: rendered\n%s\nwant\n%s", res.Engine, res.Rendered, want)
		}
		plain := must[sandbox.SearchResult](t)(tr.Search(bg, sandbox.SearchRequest{Pattern: `needle \d`, MaxResults: 1}))
		if len(plain.Hits) != 1 || !plain.Truncated || plain.Rendered != "a.txt:3: needle 1\n" {
			t.Fatalf("%s: max_results 1: %+v", plain.Engine, plain)
		}
		for _, bad := range []sandbox.SearchRequest{{}, {Pattern: "x", Context: 11}, {Pattern: "x", Glob: "a\nb"}} {
			_, err := tr.Search(bg, bad)
			wantCode(t, err, protocol.CodeInvalidPayload)
		}
	}
}

func TestTreeSearchAdjacentHitsShareContext(t *testing.T) {
	for _, rg := range []string{"", "-"} {
		tr, _ := newTree(t, map[string]string{"f": "x\nhit\nmid\nhit\ny\n"}, sandbox.TreeOptions{RgBin: rg})
		res := must[sandbox.SearchResult](t)(tr.Search(bg, sandbox.SearchRequest{Pattern: "hit", Context: 1}))
		want := "f-1- x\nf:2: hit\nf-3- mid\nf:4: hit\nf-5- y\n"
		if res.Rendered != want || len(res.Hits) != 2 || strings.Join(res.Hits[1].Before, "") != "mid" {
			t.Fatalf("%s: rendered %q hits %+v", res.Engine, res.Rendered, res.Hits)
		}
	}
}

// FuzzTreePath sends arbitrary paths through every read operation of a
// Tree whose directory holds symlinks leading out: nothing outside is
// ever returned, and a refused path answers invalid_path.
func FuzzTreePath(f *testing.F) {
	outside := f.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("TOPSECRET\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "in.txt"), []byte("inside\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	for name, target := range map[string]string{"out": outside, "sub/secret": filepath.Join(outside, "secret"), "sub/up": "../../", "loop": "loop"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			f.Fatal(err)
		}
	}
	tr, err := sandbox.NewTree(dir, sandbox.TreeOptions{RgBin: "-"})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"sub/in.txt", "out/secret", "sub/secret", "sub/up/secret", "../secret", "/etc/passwd", "sub//./in.txt", "loop", "a\x00b", "", ".", strings.Repeat("x/", 2049),
		"OUT/secret", "Sub/Up/secret", "%2e%2e/secret", "sub\\..\\..\\secret", "sub/in.txt\x00/../../secret", dir + "/out/secret", "./../" + filepath.Base(outside) + "/secret"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		check := func(op string, res any, err error) {
			if err != nil {
				if c := codeOf(err); c != protocol.CodeInvalidPath && c != protocol.CodeInvalidPayload {
					t.Fatalf("%s %q: %v, want invalid_path", op, p, err)
				}
				return
			}
			if out := fmt.Sprint(res); strings.Contains(out, "TOPSECRET") || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte("TOPSECRET"))) {
				t.Fatalf("%s %q read outside the tree: %s", op, p, out)
			}
		}
		r, err := tr.ReadFile(bg, sandbox.ReadFileRequest{Path: p})
		check("read-file", r, err)
		s, err := tr.Stat(bg, sandbox.PathRequest{Path: p})
		check("stat", s, err)
		l, err := tr.ListDir(bg, sandbox.ListDirRequest{Path: p, Depth: 3})
		check("list-dir", l, err)
		d, err := tr.Readdir(bg, sandbox.PathRequest{Path: p})
		check("readdir", d, err)
		h, err := tr.Search(bg, sandbox.SearchRequest{Pattern: "TOP", Path: p})
		check("search", h, err)
		if err == nil && len(h.Hits) > 0 {
			t.Fatalf("search %q found text outside the tree: %+v", p, h.Hits)
		}
	})
}

// TestTreeDoesNotBlockOnAFIFO: a FIFO an agent made answers at once
// instead of holding the call (and its goroutine) until a writer comes.
func TestTreeDoesNotBlockOnAFIFO(t *testing.T) {
	for _, rg := range []string{"", "-"} {
		tr, dir := newTree(t, map[string]string{"a.txt": "pipe\n"}, sandbox.TreeOptions{RgBin: rg})
		if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		errs := make(chan []error, 1)
		var hits int
		go func() {
			var out []error
			_, err := tr.ReadFile(bg, sandbox.ReadFileRequest{Path: "fifo"})
			out = append(out, err)
			_, err = tr.StrReplace(bg, sandbox.StrReplaceRequest{Path: "fifo", Old: "a", New: "b"})
			out = append(out, err)
			_, err = tr.Search(bg, sandbox.SearchRequest{Pattern: "pipe", Path: "fifo"})
			out = append(out, err)
			_, err = tr.Readdir(bg, sandbox.PathRequest{Path: "fifo"})
			out = append(out, err)
			res, err := tr.Search(bg, sandbox.SearchRequest{Pattern: "pipe"})
			hits = len(res.Hits)
			errs <- append(out, err)
		}()
		select {
		case got := <-errs:
			for _, err := range got[:4] {
				wantCode(t, err, protocol.CodeInvalidPath)
			}
			if got[4] != nil || hits != 1 {
				t.Fatalf("search of the directory holding the FIFO: %d hits, %v", hits, got[4])
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an operation on a FIFO is still waiting after 10s")
		}
	}
}
