//go:build !windows

package dap

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// coreInfo is what a post-mortem session needs to know of an ELF core
// dump before any adapter sees it: that it is a core at all, which program
// dumped it (to refuse a core of another program at once, which lldb-dap
// and delve would open and show garbage from) and the signal that killed it.
type coreInfo struct {
	path   string
	signal string   // SIGSEGV, …; "" when the core records none
	files  []string // the mapped files (NT_FILE), the executable among them
	fname  string   // the process's name (NT_PRPSINFO pr_fname, 15 bytes at most)
}

// ELF note types of Linux cores.
const (
	ntPrstatus = 1
	ntPrpsinfo = 3
	ntFile     = 0x46494c45 // "FILE"
)

// readCore reads the notes of the core dump at path.
func readCore(path string) (*coreInfo, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("is not an ELF file: %v", err)
	}
	defer f.Close()
	if f.Type != elf.ET_CORE {
		return nil, fmt.Errorf("is an ELF %s, not a core dump", f.Type)
	}
	ci := &coreInfo{path: path}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(p.Open(), 64<<20))
		if err != nil {
			return nil, fmt.Errorf("cannot read its notes: %v", err)
		}
		parseCoreNotes(data, f.ByteOrder, f.Class == elf.ELFCLASS64, ci)
	}
	return ci, nil
}

// parseCoreNotes fills ci from one PT_NOTE segment. It never fails: a
// truncated or strange note is skipped (the adapter will say more).
func parseCoreNotes(data []byte, order binary.ByteOrder, is64 bool, ci *coreInfo) {
	align := func(n uint32) int { return int((uint64(n) + 3) &^ 3) }
	for len(data) >= 12 {
		namesz, descsz, typ := order.Uint32(data), order.Uint32(data[4:]), order.Uint32(data[8:])
		data = data[12:]
		nlen, dlen := align(namesz), align(descsz)
		if nlen < 0 || dlen < 0 || nlen > len(data) || dlen > len(data)-nlen || int(descsz) > dlen {
			return
		}
		desc := data[nlen : nlen+int(descsz)]
		data = data[nlen+dlen:]
		switch typ {
		case ntPrstatus:
			// struct elf_prstatus begins with struct elf_siginfo (si_signo
			// first), then pr_cursig: the kernel fills both, gdb's gcore
			// only pr_cursig.
			if len(desc) >= 14 && ci.signal == "" {
				n := int32(order.Uint32(desc))
				if n == 0 {
					n = int32(int16(order.Uint16(desc[12:])))
				}
				if n > 0 && n < 65 {
					ci.signal = unix.SignalName(syscall.Signal(n))
				}
			}
		case ntPrpsinfo:
			// 64-bit struct elf_prpsinfo: pr_fname[16] at offset 40.
			if is64 && len(desc) >= 56 && ci.fname == "" {
				ci.fname = string(bytes.TrimRight(desc[40:56], "\x00"))
			}
		case ntFile:
			ci.files = append(ci.files, fileNote(desc, order, is64)...)
		}
	}
}

// fileNote lists the file names of an NT_FILE note: count and page size,
// count (start, end, offset) triples, then count NUL-terminated names.
func fileNote(desc []byte, order binary.ByteOrder, is64 bool) []string {
	word := 4
	get := func(b []byte) uint64 { return uint64(order.Uint32(b)) }
	if is64 {
		word = 8
		get = order.Uint64
	}
	if len(desc) < 2*word {
		return nil
	}
	count := get(desc)
	skip := uint64(2*word) + count*uint64(3*word)
	if count > uint64(len(desc)) || skip > uint64(len(desc)) {
		return nil
	}
	var names []string
	for _, n := range bytes.Split(desc[skip:], []byte{0}) {
		if len(n) > 0 && uint64(len(names)) < count {
			names = append(names, string(n))
		}
	}
	return names
}

// dumpedBy reports whether program (an absolute path) dumped the core,
// and if not, what did: a mapped file with the program's name, else the
// process name, decides; a core that records neither is taken as matching.
func (ci *coreInfo) dumpedBy(program string) (bool, string) {
	base := filepath.Base(program)
	if len(ci.files) > 0 {
		for _, f := range ci.files {
			if filepath.Base(f) == base {
				return true, ""
			}
		}
		return false, ci.files[0]
	}
	if ci.fname != "" {
		short := base
		if len(short) > 15 {
			short = short[:15]
		}
		return ci.fname == short, ci.fname
	}
	return true, ""
}
