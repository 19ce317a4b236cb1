package jslog

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/jstest"
	"github.com/plaudit/plaudit/persist"
)

// BenchmarkPartitionAppend measures one partition's log against its
// building block, on one synced JetStream server and on three: Append (a
// fenced batch of one ~100-byte event, the next sent once the last is
// acknowledged, as a partition's owner sends them), a plain synced publish
// of the same size to the same stream, and plain publishes with 64 in
// flight (what the stream takes when writes are pipelined).
//
//	go test -run - -bench PartitionAppend ./persist/jslog
func BenchmarkPartitionAppend(b *testing.B) {
	event := []byte(strings.Repeat("e", 100))
	for _, servers := range []int{1, 3} {
		js, err := jetstream.New(jstest.Cluster(b, servers))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		l, err := Open(ctx, js, 0, Config{Replicas: servers})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Fence(ctx, 1); err != nil {
			b.Fatal(err)
		}
		runs := 0 // each run's agents are new: a message id is never sent twice
		b.Run(fmt.Sprintf("R%d/append", servers), func(b *testing.B) {
			runs++
			agent := fmt.Sprintf("agt_bench%d", runs)
			for i := range b.N {
				if _, err := l.Append(ctx, persist.Batch{Agent: agent, First: uint64(i + 1),
					Events: [][]byte{event}}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("R%d/append-64-agents", servers), func(b *testing.B) {
			// 64 agents of one partition appending at once, as 64 actors
			// do: their writes go out in groups.
			runs++
			var wg sync.WaitGroup
			var failed atomic.Value
			next := make(chan int)
			for a := range 64 {
				wg.Go(func() {
					agent := fmt.Sprintf("agt_bench%d_%d", runs, a)
					for i := range next {
						if _, err := l.Append(ctx, persist.Batch{Agent: agent, First: uint64(i + 1),
							Events: [][]byte{event}}); err != nil {
							failed.Store(err)
						}
					}
				})
			}
			for i := range b.N {
				next <- i
			}
			close(next)
			wg.Wait()
			if err := failed.Load(); err != nil {
				b.Fatal(err)
			}
		})
		b.Run(fmt.Sprintf("R%d/publish", servers), func(b *testing.B) {
			for range b.N {
				if _, err := js.Publish(ctx, "plaudit.log.0.raw", event); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("R%d/publish-64-in-flight", servers), func(b *testing.B) {
			acks := make(chan jetstream.PubAckFuture, 64)
			done := make(chan error)
			go func() {
				var err error
				for f := range acks {
					select {
					case <-f.Ok():
					case e := <-f.Err():
						err = e
					}
				}
				done <- err
			}()
			for range b.N {
				f, err := js.PublishAsync("plaudit.log.0.raw", event)
				if err != nil {
					b.Fatal(err)
				}
				acks <- f
			}
			close(acks)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
