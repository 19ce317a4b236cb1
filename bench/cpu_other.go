//go:build !unix

package bench

import "time"

// processCPU is not measured here; Result.CPU stays zero.
func processCPU() time.Duration { return 0 }
