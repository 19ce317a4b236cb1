// Package bench measures Plaudit from outside, against the building blocks
// it is made of, on the same machine and in the same run. It is the engine
// of `plaudit bench` (see BENCHMARKS.md).
//
// The server under test runs in a process of its own: by default Run
// starts `plaudit serve` (Options.Bin) as a child per family of rows, over
// a fresh data directory, on free loopback ports, with a generated admin
// key and a loopback pprof listener; or it loads a running server
// (Options.Target). The load generator is this process. The baselines are
// measured through the same clients: a fasthttp fixed-body handler and a
// NATS echo on a NATS server set up as Plaudit's, both in another child
// (`plaudit bench-hello`, ServeHello); raw synced Pebble appends of a
// signal's size; one Beta draw per variation; and, where redis-server is
// installed, selection and feedback built on Redis with go-redis, once
// without persistence and once with appendfsync always.
//
// Figures are meant to be read as ratios against those baselines, never as
// absolute numbers, since the machines they run on are noisy; nothing here
// asserts a time. The CPU of each row is that of the process under test,
// read from /proc, which unlike wall time does not grow when other
// programs take the machine's cores.
//
// A row is a closed loop by default (C workers, each issuing its next
// operation when the previous one answered: what C waiting callers see)
// or an open loop at a fixed rate whose latencies are measured from each
// operation's due time (Loop). Latencies go into HDR histograms.
//
// The Go benchmarks of this package (go test -bench) run the same
// workloads against a server in the test process, for quick profiling with
// go test's own flags; published figures come from `plaudit bench`.
package bench
