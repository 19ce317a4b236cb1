package api

import (
	"testing"
	"time"
)

// TestObserveAllocatesNothing: counting a request, once its door and
// operation have been seen, allocates nothing.
func TestObserveAllocatesNothing(t *testing.T) {
	m := newRequestMetrics()
	for _, tc := range []struct {
		door   Door
		op     Op
		status int
	}{
		{DoorHTTP, RecordSignal, 201},
		{DoorNATS, CreateRun, 503},
		{DoorHTTP, "", 401},
		{DoorNATS, "no_such_op", 404},
	} {
		m.observe(tc.door, tc.op, tc.status, time.Millisecond)
		if n := testing.AllocsPerRun(100, func() { m.observe(tc.door, tc.op, tc.status, time.Millisecond) }); n != 0 {
			t.Errorf("observe(%v, %q, %d) allocates %v times", tc.door, tc.op, tc.status, n)
		}
	}
}

// BenchmarkObserve is the metrics' cost per request.
func BenchmarkObserve(b *testing.B) {
	m := newRequestMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.observe(DoorHTTP, RecordSignal, 201, 300*time.Microsecond)
	}
}
