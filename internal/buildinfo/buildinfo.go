// Package buildinfo tells what tether build this is: its release version
// (stamped at link time by make release), the commit and its time (from the
// VCS information the go command records), and the Go version.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// version is set at link time:
// -ldflags "-X github.com/tetherdev/tether/internal/buildinfo.version=v1.2.3".
var version = "dev"

// Info describes the running build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`     // full hash; empty when not recorded
	BuildDate string `json:"build_date,omitempty"` // the commit's time (RFC 3339), so two builds of one commit agree
	Modified  bool   `json:"modified,omitempty"`   // built from a work tree with changes
	GoVersion string `json:"go_version"`
}

// Get returns the running build's Info.
func Get() Info {
	in := Info{Version: version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	in.GoVersion = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.BuildDate = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// Version returns the release version ("dev" for a build outside make
// release): service.version in traces.
func Version() string { return version }

// String is the one line `tether version` prints after "tether ".
func (in Info) String() string {
	var b strings.Builder
	b.WriteString(in.Version)
	if len(in.Commit) >= 12 {
		b.WriteString(" (" + in.Commit[:12])
		if in.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	if in.BuildDate != "" {
		b.WriteString(" " + in.BuildDate)
	}
	if in.GoVersion != "" {
		b.WriteString(" " + in.GoVersion)
	}
	return b.String()
}
