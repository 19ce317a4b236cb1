//go:build !linux

package bench

import (
	"errors"
	"time"
)

// procCPU is not measured off Linux; CPU columns stay empty.
func procCPU(int) time.Duration { return 0 }

// procRSS needs /proc; the memory rows are skipped off Linux.
func procRSS(int) (int64, error) { return 0, errors.New("bench: RSS is read from /proc (Linux only)") }
