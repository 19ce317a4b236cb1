package bench

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// durableIngest is every row of BenchmarkDurableIngest; the baselines
// (raw-pebble, fasthttp-hello) run at the same concurrencies so that the
// HTTP rows can be read as ratios against them.
var durableIngest = []struct {
	name string
	cs   []int
	run  func(dir string, c, n int) (Result, error)
}{
	{"raw-pebble", []int{1, 64}, RawPebbleAppend},
	{"http-signal", []int{1, 64}, withServer(HTTPSignalIngest)},
	{"http-signal-64agents", []int{64}, withServer(HTTPSignalIngestAgents)},
	{"fasthttp-hello", []int{1, 64}, func(_ string, c, n int) (Result, error) { return FasthttpHello(c, n) }},
}

// BenchmarkDurableIngest runs b.N operations of each workload; ns/op is the
// harness's wall time over the operations (setup excluded), so at c>1 it
// falls as concurrent operations overlap.
func BenchmarkDurableIngest(b *testing.B) {
	for _, wl := range durableIngest {
		b.Run(wl.name, func(b *testing.B) {
			for _, c := range wl.cs {
				b.Run(fmt.Sprint("c=", c), func(b *testing.B) {
					res, err := wl.run(b.TempDir(), c, b.N)
					if err != nil {
						b.Fatal(err)
					}
					if res.Errors > 0 {
						b.Fatalf("%d of %d ops failed, e.g. %v", res.Errors, b.N, res.FirstErr)
					}
					b.ReportMetric(float64(res.Elapsed.Nanoseconds())/float64(res.Ops), "ns/op")
					b.ReportMetric(res.OpsPerSec, "ops/s")
					b.ReportMetric(float64(res.P50)/float64(time.Microsecond), "p50-µs")
					b.ReportMetric(float64(res.P99)/float64(time.Microsecond), "p99-µs")
					b.ReportMetric(float64(res.CPUPerOp())/float64(time.Microsecond), "cpu-µs/op")
				})
			}
		})
	}
}

// TestHarnessSmoke runs every workload a few times and checks that every
// operation was made and answered as expected (201 for a signal, 200 for
// hello). It checks the harness, not the speed.
func TestHarnessSmoke(t *testing.T) {
	const n = 24
	for _, wl := range durableIngest {
		for _, c := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/c=%d", wl.name, c), func(t *testing.T) {
				res, err := wl.run(t.TempDir(), c, n)
				if err != nil {
					t.Fatal(err)
				}
				if res.Errors != 0 || res.Ops != n {
					t.Fatalf("%d ops succeeded and %d failed, want %d and 0 (first failure: %v)",
						res.Ops, res.Errors, n, res.FirstErr)
				}
				if res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.Max {
					t.Fatalf("percentiles out of order: %v", res)
				}
			})
		}
	}
}

func TestHTTPSignalIngestRejectsWrongKey(t *testing.T) {
	s, err := StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = HTTPSignalIngest("http://"+s.HTTPAddr(), "not-the-key", 1, 1)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 401 {
		t.Fatalf("err = %v, want a 401 StatusError", err)
	}
}

func TestRunOpsCountsFailures(t *testing.T) {
	boom := errors.New("boom")
	res, err := RunOps(3, 30, func(int) (Op, error) {
		i := 0
		return func() error {
			i++
			if i%2 == 0 {
				return boom
			}
			return nil
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops+res.Errors != 30 || res.Errors == 0 || !errors.Is(res.FirstErr, boom) {
		t.Fatalf("got %v, want 30 ops in all, some failed with boom", res)
	}
}

func TestRunForStopsAtDeadline(t *testing.T) {
	res, err := RunFor(2, 20*time.Millisecond, func(int) (Op, error) {
		return func() error { time.Sleep(time.Millisecond); return nil }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Errors != 0 {
		t.Fatalf("got %v, want some ops and no errors", res)
	}
}

func TestQuantileNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0, 1}} {
		if got := quantile(d, tc.q); got != tc.want {
			t.Errorf("quantile(1..100, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(d[:1], 0.99); got != 1 {
		t.Errorf("quantile of one = %v, want 1", got)
	}
}

func TestRunWritesTable(t *testing.T) {
	var out strings.Builder
	if err := Run(&out, Options{Ops: 16, Dir: t.TempDir(), Concurrency: []int{1, 2}}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, row := range []string{"raw-pebble", "fasthttp-hello", "http-signal", "http-signal-agents", "p50 ÷ hello"} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("table lacks %q:\n%s", row, out.String())
		}
	}
}
