//go:build !windows

package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/tetherdev/tether/protocol"
)

// Repo names one repository: where to fetch it from and where its cache
// lives under the sandbox root.
type Repo struct {
	// URL is what git is given: a URL without credentials, or an absolute
	// local path.
	URL string `json:"url"`
	// Host, Owner and Name place the cache at repos/{Host}/{Owner}/{Name}.git.
	// Local paths use the host "local".
	Host  string `json:"host"`
	Owner string `json:"owner"`
	Name  string `json:"name"`
}

// Key is the repository's place under repos/ and worktrees/, e.g.
// "github.com/tetherdev/tether".
func (r Repo) Key() string { return r.Host + "/" + r.Owner + "/" + r.Name }

var (
	segmentRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
	hostRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?$`)
	scpRe     = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9._-]*)@([A-Za-z0-9][A-Za-z0-9.-]*):([^/].*)$`)
	idRe      = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// ParseRepo validates a repository URL and derives its cache location.
// Accepted: https:// and http:// URLs without a password, ssh://, scp-like
// git@host:owner/repo, file:// URLs and absolute local paths. Anything
// else, anything with control characters or a leading '-', answers
// invalid_ref.
func ParseRepo(raw string) (Repo, error) {
	bad := func(why string) (Repo, error) {
		return Repo{}, protocol.Errorf(protocol.CodeInvalidRef, "repository %q: %s", raw, why)
	}
	if raw == "" {
		return bad("empty")
	}
	if strings.HasPrefix(raw, "-") {
		return bad("must not start with '-'")
	}
	if hasControl(raw) || strings.ContainsAny(raw, " \\") {
		return bad("contains a control character, a space or a backslash")
	}
	if len(raw) > 1024 {
		return bad("too long")
	}
	if strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, "file://") {
		p := raw
		if strings.HasPrefix(raw, "file://") {
			u, err := url.Parse(raw)
			if err != nil || (u.Host != "" && u.Host != "localhost") || u.RawQuery != "" || u.Fragment != "" {
				return bad("not a file:// URL of a local path")
			}
			p = u.Path
		}
		if len(p) > 1 {
			p = strings.TrimSuffix(p, "/")
		}
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return bad("a local path must be absolute and clean")
		}
		name := strings.TrimSuffix(filepath.Base(p), ".git")
		// Two local repositories with the same name in different places
		// must not share a cache: the owner carries a hash of the path.
		sum := sha256.Sum256([]byte(p))
		owner := sanitizeSegment(filepath.Base(filepath.Dir(p))) + "-" + hex.EncodeToString(sum[:4])
		return Repo{URL: p, Host: "local", Owner: owner, Name: sanitizeSegment(name)}, nil
	}
	var host, p string
	switch {
	case strings.HasPrefix(raw, "https://"), strings.HasPrefix(raw, "http://"), strings.HasPrefix(raw, "ssh://"):
		u, err := url.Parse(raw)
		if err != nil {
			return bad(err.Error())
		}
		if _, hasPass := u.User.Password(); hasPass {
			return bad("credentials belong in auth_token, not in the URL")
		}
		if u.User != nil && u.Scheme != "ssh" {
			return bad("credentials belong in auth_token, not in the URL")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return bad("query and fragment are not allowed")
		}
		host, p = u.Host, u.Path
	default:
		m := scpRe.FindStringSubmatch(raw)
		if m == nil {
			return bad("not an https://, ssh://, user@host:owner/repo, file:// URL or absolute path")
		}
		host, p = m[2], m[3]
	}
	if !hostRe.MatchString(host) {
		return bad("bad host")
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	segs := strings.Split(p, "/")
	if len(segs) < 2 {
		return bad("the path must be owner/repo")
	}
	for _, s := range segs {
		if !segmentRe.MatchString(s) || strings.HasSuffix(s, ".lock") {
			return bad("bad path segment " + s)
		}
	}
	host = strings.ToLower(strings.ReplaceAll(host, ":", "_"))
	return Repo{
		URL:   raw,
		Host:  host,
		Owner: strings.Join(segs[:len(segs)-1], "/"),
		Name:  segs[len(segs)-1],
	}, nil
}

func sanitizeSegment(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := strings.TrimLeft(b.String(), ".-")
	if out == "" {
		return "_"
	}
	return out
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// ValidateRef checks a branch or tag name the way `git check-ref-format
// --branch` does, and more strictly: no leading '-', so a ref can never be
// read as an option. It answers invalid_ref.
func ValidateRef(name string) error {
	if why := refProblem(name); why != "" {
		return protocol.Errorf(protocol.CodeInvalidRef, "ref %q: %s", name, why)
	}
	return nil
}

func refProblem(name string) string {
	switch {
	case name == "":
		return "empty"
	case len(name) > 255:
		return "too long"
	case strings.HasPrefix(name, "-"):
		return "must not start with '-'"
	case name == "@" || name == "HEAD":
		return "reserved name"
	case strings.Contains(name, ".."):
		return "must not contain '..'"
	case strings.Contains(name, "@{"):
		return "must not contain '@{'"
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return "bad '/'"
	case strings.HasSuffix(name, "."):
		return "must not end with '.'"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c == 0x7f || c == ' ' || strings.IndexByte("~^:?*[\\", c) >= 0 {
			return "must not contain control characters, spaces or any of ~^:?*[\\"
		}
	}
	for _, comp := range strings.Split(name, "/") {
		if strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return "a component must not start with '.' or end with '.lock'"
		}
	}
	return ""
}

// revSuffix is the ~N / ^N tail a revision may carry (HEAD~1, main^2).
var revSuffix = regexp.MustCompile(`(?:[~^][0-9]{0,4})+$`)

// ValidateRevision checks what a diff may be against: HEAD, a branch or
// tag name (as ValidateRef), or a commit id (4-64 hex digits), optionally
// followed by ~N or ^N. It answers invalid_ref.
func ValidateRevision(rev string) error {
	base := revSuffix.ReplaceAllString(rev, "")
	if base == "HEAD" || (len(base) >= 4 && len(base) <= 64 && isHex(base)) {
		return nil
	}
	if why := refProblem(base); why != "" {
		return protocol.Errorf(protocol.CodeInvalidRef, "ref %q: %s", rev, why)
	}
	return nil
}

// validateID checks an id that becomes part of a branch name
// (conversation_id, task_id); it answers invalid_ref.
func validateID(field, id string) error {
	if !idRe.MatchString(id) || strings.HasSuffix(id, ".lock") || strings.Contains(id, "..") || strings.HasSuffix(id, ".") {
		return protocol.Errorf(protocol.CodeInvalidRef, "%s %q: use 1-128 of [A-Za-z0-9_.-], not starting with '.' or '-'", field, id)
	}
	return nil
}

// validateName checks user and project ids, which only key workspaces.
func validateName(field, v string) error {
	if v == "" || len(v) > 256 || hasControl(v) {
		return protocol.Errorf(protocol.CodeInvalidPayload, "%s must be 1-256 characters without control characters", field)
	}
	return nil
}

// remoteName checks the remote of a push.
func validateRemote(name string) error {
	if !segmentRe.MatchString(name) {
		return protocol.Errorf(protocol.CodeInvalidRef, "remote %q", name)
	}
	return nil
}

// Validate checks the request without touching the disk.
func (r *AcquireRequest) Validate() error {
	_, err := r.check()
	return err
}

func (r *AcquireRequest) check() (Repo, error) {
	repo, err := ParseRepo(r.Repo)
	if err != nil {
		return Repo{}, err
	}
	if r.BaseRef != "" {
		if err := ValidateRef(r.BaseRef); err != nil {
			return Repo{}, err
		}
	}
	if err := validateName("user_id", r.UserID); err != nil {
		return Repo{}, err
	}
	if err := validateName("project_id", r.ProjectID); err != nil {
		return Repo{}, err
	}
	switch r.Mode {
	case ModeAnalysis:
	case ModeEdit:
		if err := validateID("conversation_id", r.ConversationID); err != nil {
			return Repo{}, err
		}
	case ModeTask:
		if err := validateID("task_id", r.TaskID); err != nil {
			return Repo{}, err
		}
	default:
		return Repo{}, protocol.Errorf(protocol.CodeInvalidPayload, "mode %q: use analysis, edit or task", r.Mode)
	}
	switch r.Network {
	case "", NetworkNone, NetworkHost:
	default:
		return Repo{}, protocol.Errorf(protocol.CodeInvalidPayload, "network %q: use none or host", r.Network)
	}
	if r.Container != nil {
		if err := r.Container.Check(); err != nil {
			return Repo{}, err
		}
	}
	return repo, nil
}

// Bounds of ContainerOptions.
const (
	minContainerMemory = 6 << 20 // the engines' own minimum
	maxContainerMemory = 1 << 40
	minContainerPids   = 16 // fewer cannot run a shell and a pipeline
	maxContainerPids   = 1 << 22
)

var (
	userRe   = regexp.MustCompile(`^[0-9]{1,10}:[0-9]{1,10}$`)
	memoryRe = regexp.MustCompile(`^([0-9]{1,13})([kKmMgG]?)[bB]?$`)
)

// Check refuses options out of range, naming the field
// (container.memory, …), with invalid_payload. Whether the image exists is
// the engine's to say, when the runtime starts.
func (o *ContainerOptions) Check() error {
	bad := func(field, format string, args ...any) error {
		return protocol.Errorf(protocol.CodeInvalidPayload, "container.%s %s", field, fmt.Sprintf(format, args...))
	}
	if o.Image != "" && (len(o.Image) > 255 || strings.HasPrefix(o.Image, "-") || hasControl(o.Image) || strings.ContainsAny(o.Image, " \\")) {
		return bad("image", "%q: not an image reference", o.Image)
	}
	if n := float64(runtime.NumCPU()); o.CPUs < 0 || o.CPUs > n || (o.CPUs > 0 && o.CPUs < 0.01) {
		return bad("cpus", "%v: use 0.01 to %v (this machine's CPUs), or 0 for no limit", o.CPUs, n)
	}
	if o.Memory != "" {
		if _, err := o.MemoryBytes(); err != nil {
			return err
		}
	}
	if o.Pids != 0 && (o.Pids < minContainerPids || o.Pids > maxContainerPids) {
		return bad("pids", "%d: use %d to %d, or 0 for no limit", o.Pids, minContainerPids, maxContainerPids)
	}
	for k, v := range o.Env {
		if !envKeyRe.MatchString(k) || strings.IndexByte(v, 0) >= 0 {
			return bad("env", "%q: bad name or value", k)
		}
	}
	if o.User != "" && !userRe.MatchString(o.User) {
		return bad("user", "%q: use a numeric uid:gid such as 1000:1000", o.User)
	}
	return nil
}

// MemoryBytes is Memory in bytes; 0 when empty.
func (o *ContainerOptions) MemoryBytes() (int64, error) {
	if o.Memory == "" {
		return 0, nil
	}
	m := memoryRe.FindStringSubmatch(o.Memory)
	if m == nil {
		return 0, protocol.Errorf(protocol.CodeInvalidPayload, "container.memory %q: use bytes or a number with k, m or g, such as 512m", o.Memory)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64) // at most 13 digits: it fits
	shift := map[string]uint{"": 0, "k": 10, "m": 20, "g": 30}[strings.ToLower(m[2])]
	// Compared before the shift, which would wrap a large number round
	// into the range ("17179869185g" is 1g after the shift).
	if n > maxContainerMemory>>shift || n<<shift < minContainerMemory {
		return 0, protocol.Errorf(protocol.CodeInvalidPayload, "container.memory %q: use 6m to 1024g", o.Memory)
	}
	return n << shift, nil
}
