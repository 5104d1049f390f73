//go:build !windows

package dap

import "encoding/binary"

// XcodeLLDBDAP runs the macOS lldb-dap search over a fake tree: the
// command line tools' folder, and fake xcode-select and xcrun programs.
func (e *Env) XcodeLLDBDAP(commandLineTools, xcodeSelect, xcrun string) string {
	return e.xcodeLLDBDAP(xcodeTools{commandLineTools, xcodeSelect, xcrun})
}

// CoreNotes parses one PT_NOTE segment of a little-endian 64-bit core as
// a post-mortem start does, and returns the signal, the mapped files and
// the process name it found.
func CoreNotes(data []byte) (signal string, files []string, fname string) {
	ci := &coreInfo{}
	parseCoreNotes(data, binary.LittleEndian, true, ci)
	return ci.signal, ci.files, ci.fname
}

// WarmIdled is how many warm adapters ended for idleness.
func (m *Manager) WarmIdled() int {
	m.warm.mu.Lock()
	defer m.warm.mu.Unlock()
	return m.warm.idled + m.warm.nodes.Idled()
}

// GoBuilds is how many times the manager's Go prebuild has run go build.
func (m *Manager) GoBuilds() int {
	if m.warm == nil {
		return 0
	}
	m.warm.builds.mu.Lock()
	defer m.warm.builds.mu.Unlock()
	return m.warm.builds.goRuns
}

// PrebuiltDir is the directory of the manager's prebuilt Go binaries, ""
// before the first.
func (m *Manager) PrebuiltDir() string {
	if m.warm == nil {
		return ""
	}
	m.warm.builds.mu.Lock()
	defer m.warm.builds.mu.Unlock()
	return m.warm.builds.dir
}

// Setenv sets kv (KEY=VALUE) in the environment adapters and builds run
// with, as if the manager had been made with it. Call it between
// sessions, with no warm adapter being made.
func (m *Manager) Setenv(kv string) {
	m.env.Environ = append(m.env.Environ[:len(m.env.Environ):len(m.env.Environ)], kv)
}
