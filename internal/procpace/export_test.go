package procpace

import "time"

// SetCPU makes p read the process's CPU time from cpu instead of the
// system; call it before Start.
func SetCPU(p *Pacer, cpu func() time.Duration) { p.cpu = cpu }
