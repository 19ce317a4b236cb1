//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU is the user plus system time this process has used. The
// workloads run client and server in one process, so it is the CPU of both.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
