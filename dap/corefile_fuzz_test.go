//go:build !windows

package dap_test

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/tetherdev/tether/dap"
)

// note builds one ELF note (name "CORE", 4-byte aligned).
func note(typ uint32, desc []byte) []byte {
	name := []byte("CORE\x00\x00\x00\x00")
	b := binary.LittleEndian.AppendUint32(nil, 5)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = append(b, name...)
	b = append(b, desc...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func sampleNotes() []byte {
	status := binary.LittleEndian.AppendUint32(nil, 11) // si_signo SIGSEGV
	status = append(status, make([]byte, 100)...)
	psinfo := make([]byte, 136)
	copy(psinfo[40:], "crash")
	files := binary.LittleEndian.AppendUint64(nil, 2)
	files = binary.LittleEndian.AppendUint64(files, 4096)
	files = append(files, make([]byte, 2*3*8)...)
	files = append(files, "/w/crash\x00/lib/libc.so.6\x00"...)
	return slices.Concat(note(1, status), note(3, psinfo), note(0x46494c45, files))
}

func TestCoreNotesReadSignalFilesAndName(t *testing.T) {
	sig, files, fname := dap.CoreNotes(sampleNotes())
	if sig != "SIGSEGV" || !slices.Equal(files, []string{"/w/crash", "/lib/libc.so.6"}) || fname != "crash" {
		t.Fatalf("notes = %q %q %q", sig, files, fname)
	}
}

// FuzzCoreNotes: a core file is outside input; its notes never panic the
// parser, whatever their sizes claim.
func FuzzCoreNotes(f *testing.F) {
	f.Add(sampleNotes())
	f.Add(note(0x46494c45, binary.LittleEndian.AppendUint64(nil, 1<<62)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, files, _ := dap.CoreNotes(data)
		if len(files) > len(data) {
			t.Fatalf("%d files from %d bytes", len(files), len(data))
		}
	})
}
