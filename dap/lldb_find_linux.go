package dap

// lldbInstallHint says how to get lldb-dap on this platform.
const lldbInstallHint = "install lldb-dap (Debian/Ubuntu: apt install lldb-19, which provides lldb-dap-19)"

// lldbElsewhere names where else findLLDBDAP looked: nowhere on Linux.
const lldbElsewhere = ""

// platformLLDBDAP: Linux packages put lldb-dap on PATH; nowhere else to look.
func (e *Env) platformLLDBDAP() string { return "" }
