//go:build !windows

package dap

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/tailscale/hujson"
)

// LaunchFile is the relative path of the workspace's launch configurations.
const LaunchFile = ".vscode/launch.json"

// Vars are the values ${…} variables in launch.json resolve to.
type Vars struct {
	WorkspaceFolder string
	// File is the "current file" (${file}); relative paths are taken from
	// WorkspaceFolder. Empty resolves ${file} to "".
	File string
	// Env looks up ${env:X}; nil means os.Getenv.
	Env func(string) string
}

var varRef = regexp.MustCompile(`\$\{([^}]*)\}`)

// Resolve substitutes the variables in s. Unknown variables (${command:…},
// ${input:…}) are left as they are so the caller can see what was not
// resolved.
func (v Vars) Resolve(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	file := v.File
	if file != "" && !filepath.IsAbs(file) {
		file = filepath.Join(v.WorkspaceFolder, file)
	}
	getenv := v.Env
	if getenv == nil {
		getenv = os.Getenv
	}
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		switch name {
		case "workspaceFolder", "workspaceRoot":
			return v.WorkspaceFolder
		case "workspaceFolderBasename":
			return filepath.Base(v.WorkspaceFolder)
		case "file":
			return file
		case "fileBasename":
			return base(file)
		case "fileBasenameNoExtension":
			b := base(file)
			return strings.TrimSuffix(b, filepath.Ext(b))
		case "fileDirname":
			if file == "" {
				return ""
			}
			return filepath.Dir(file)
		case "fileExtname":
			return filepath.Ext(file)
		case "relativeFile":
			if r, err := filepath.Rel(v.WorkspaceFolder, file); err == nil && file != "" {
				return r
			}
			return ""
		case "cwd":
			return v.WorkspaceFolder
		case "pathSeparator", "/":
			return string(filepath.Separator)
		case "userHome":
			h, _ := os.UserHomeDir()
			return h
		}
		if env, ok := strings.CutPrefix(name, "env:"); ok {
			return getenv(env)
		}
		return ref
	})
}

func base(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Base(p)
}

// resolveAll substitutes variables in every string of a decoded JSON value.
func (v Vars) resolveAll(x any) any {
	switch t := x.(type) {
	case string:
		return v.Resolve(t)
	case []any:
		for i := range t {
			t[i] = v.resolveAll(t[i])
		}
		return t
	case map[string]any:
		for k, e := range t {
			t[k] = v.resolveAll(e)
		}
		return t
	}
	return x
}

// ParseLaunchJSON reads launch.json content: JSON with comments and trailing
// commas. It returns the configurations with variables resolved; entries that
// are not objects are skipped.
func ParseLaunchJSON(data []byte, vars Vars) ([]LaunchConfig, error) {
	std, err := hujson.Standardize(data)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", LaunchFile, err)
	}
	var doc struct {
		Configurations []json.RawMessage `json:"configurations"`
	}
	if err := json.Unmarshal(std, &doc); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", LaunchFile, err)
	}
	out := make([]LaunchConfig, 0, len(doc.Configurations))
	for _, raw := range doc.Configurations {
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil || m == nil {
			continue
		}
		out = append(out, LaunchConfig(vars.resolveAll(m).(map[string]any)))
	}
	return out, nil
}

// ReadLaunchJSON reads root/.vscode/launch.json. A missing file is no
// configurations and no error.
func ReadLaunchJSON(root string, vars Vars) ([]LaunchConfig, error) {
	data, err := os.ReadFile(filepath.Join(root, LaunchFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", LaunchFile, err)
	}
	return ParseLaunchJSON(data, vars)
}
