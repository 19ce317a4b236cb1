package pebblelog

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/plaudit/plaudit/persist"
)

// Both benchmarks write one 128-byte event per op, synced, on real disk, from
// p goroutines that each own one agent; ns/op at p>1 is wall time over all
// ops, so it falls as concurrent commits share fsyncs.
var benchParallelism = []int{1, 64}

const benchPayload = 128

func BenchmarkAppend(b *testing.B) {
	for _, p := range benchParallelism {
		b.Run(fmt.Sprint("p=", p), func(b *testing.B) {
			s := openDisk(b, b.TempDir())
			defer s.Close()
			events := [][]byte{make([]byte, benchPayload)}
			runWorkers(b, p, func(w int) func() error {
				agent, seq := fmt.Sprintf("agt_%03d", w), uint64(0)
				return func() error {
					seq++
					return s.Append(persist.Batch{Agent: agent, First: seq, Events: events})
				}
			})
		})
	}
}

// BenchmarkRawPebbleSyncedSet is the floor for BenchmarkAppend: the same
// Pebble options and key shape, no checksum, no Store.
func BenchmarkRawPebbleSyncedSet(b *testing.B) {
	for _, p := range benchParallelism {
		b.Run(fmt.Sprint("p=", p), func(b *testing.B) {
			db, err := OpenRaw(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			payload := make([]byte, crcLen+benchPayload)
			runWorkers(b, p, func(w int) func() error {
				agent, seq := fmt.Sprintf("agt_%03d", w), uint64(0)
				return func() error {
					seq++
					return db.Set(eventKey(agent, seq), payload, pebble.Sync)
				}
			})
		})
	}
}

// runWorkers runs b.N calls of op spread over p goroutines, each with its
// own op from mk.
func runWorkers(b *testing.B, p int, mk func(worker int) func() error) {
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range p {
		op := mk(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
