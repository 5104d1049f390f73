package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pendingMetrics are metrics the rules alert on that another piece of work
// adds to the code; each names that work. The test fails when one of them
// appears in the code, so the entry is removed then and the name checked
// like the others from there on.
var pendingMetrics = map[string]string{}

// TestRulesNameMetricsThatExist fails when an alerting rule (or its text)
// names a tether_* metric that no Go file of the module declares, so a
// renamed metric breaks the test instead of silencing an alert; and when a
// rule matches tether_calls_total's outcome label against a value that is
// neither "success" nor an error code of package protocol.
func TestRulesNameMetricsThatExist(t *testing.T) {
	declared := declaredMetrics(t)
	codes := protocolCodes(t)
	files, err := filepath.Glob("prometheus/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule files in deploy/prometheus (%v)", err)
	}
	metricRE := regexp.MustCompile(`\btether_[a-z0-9_]+\b`)
	outcomeRE := regexp.MustCompile(`outcome=~?"([^"]*)"`)
	used := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, ".test.yml") {
			continue // the cases feed the rules' names; the rules are what counts
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metricRE.FindAllString(string(b), -1) {
			used[m] = true
		}
		for _, m := range outcomeRE.FindAllStringSubmatch(string(b), -1) {
			for _, v := range strings.Split(m[1], "|") {
				if v != "success" && !codes[v] {
					t.Errorf("%s: outcome %q is not an error code of package protocol (nor \"success\")", f, v)
				}
			}
		}
	}
	if len(used) == 0 {
		t.Fatal("the rules name no tether_* metric: the pattern or the files are wrong")
	}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && declared[b] {
				base = b
			}
		}
		if why, ok := pendingMetrics[base]; ok {
			if declared[base] {
				t.Errorf("%s is declared in the code now: remove it from pendingMetrics (it was waiting for %s)", base, why)
			}
			continue
		}
		if !declared[base] {
			t.Errorf("deploy/prometheus names %s, which no Go file of the module declares (renamed or removed?)", name)
		}
	}
	for name := range pendingMetrics {
		if !used[name] {
			t.Errorf("pendingMetrics lists %s, which no rule names", name)
		}
	}
}

// declaredMetrics returns the names given as Name: "tether_…" in the
// module's non-test Go files (prometheus.CounterOpts, GaugeOpts,
// HistogramOpts), as the Go parser reads them.
func declaredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	root := ".."
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
				if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "tether_") {
						out[s] = true
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out["tether_calls_total"] {
		t.Fatalf("found no declaration of tether_calls_total in the module (found %d names): the walk is wrong", len(out))
	}
	return out
}

// protocolCodes returns the values of package protocol's Code* constants.
func protocolCodes(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("../protocol/*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, err := strconv.Unquote(lit.Value); err == nil {
							out[s] = true
						}
					}
				}
			}
		}
	}
	if !out["bus_unavailable"] {
		t.Fatalf("found no protocol.CodeBusUnavailable among %d codes: the parse is wrong", len(out))
	}
	return out
}
