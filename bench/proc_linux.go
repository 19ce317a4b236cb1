//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procCPU is the CPU time process pid has used: the sum over its threads
// of the first field of /proc/<pid>/task/<tid>/schedstat (nanoseconds on
// the CPU), which is exact where /proc/<pid>/stat counts 10 ms ticks, too
// coarse for a row of a few hundred operations. Threads that have exited
// are no longer counted; the Go runtime rarely ends its threads. Without
// schedstat (a kernel built without it) it falls back to the ticks.
func procCPU(pid int) time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			if os.IsNotExist(err) && !schedstat() {
				return procTicks(pid)
			}
			continue // the thread exited between the two reads
		}
		f := bytes.Fields(b)
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err == nil {
			sum += time.Duration(ns)
		}
	}
	return sum
}

// procTicks is the user plus system time process pid has used, from
// /proc/<pid>/stat (fields 14 and 15, counted after the command name,
// which may itself hold spaces and parentheses); zero if unreadable.
func procTicks(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// procRSS is the resident set of process pid in bytes, from VmRSS in
// /proc/<pid>/status.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(rest) // "123456 kB"
			if len(f) == 2 {
				kb, err := strconv.ParseInt(string(f[0]), 10, 64)
				if err == nil {
					return kb << 10, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("bench: no VmRSS in /proc/%d/status", pid)
}

// schedstat reports whether this kernel has per-task schedstat files.
func schedstat() bool {
	_, err := os.Stat("/proc/self/schedstat")
	return err == nil
}
