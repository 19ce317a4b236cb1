//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU is the user plus system time this process has used: the CPU
// of the workloads that run in the bench process (raw Pebble, a Beta draw,
// an in-process server in the Go benchmarks), client and server alike.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
