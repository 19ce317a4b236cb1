package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"
)

// Memory is what a memory scenario measured on a child server: its
// resident set (VmRSS) and live heap (HeapAlloc after a forced GC, through
// its pprof listener) before and after Items things were stored.
type Memory struct {
	Name       string `json:"name"`
	Items      int    `json:"items"`
	RSSBefore  int64  `json:"rss_before"`
	RSSAfter   int64  `json:"rss_after"`
	HeapBefore int64  `json:"heap_before"`
	HeapAfter  int64  `json:"heap_after"`
}

// RSSPerItem is the growth of the resident set per item, in bytes. The Go
// runtime returns freed pages lazily, so this counts garbage not yet
// collected and pages not yet given back: an upper bound.
func (m Memory) RSSPerItem() float64 { return float64(m.RSSAfter-m.RSSBefore) / float64(m.Items) }

// HeapPerItem is the growth of the live heap per item, in bytes: what the
// items keep reachable.
func (m Memory) HeapPerItem() float64 { return float64(m.HeapAfter-m.HeapBefore) / float64(m.Items) }

// measureMemory reads s's RSS and, after a GC, its live heap.
func measureMemory(s *ServerProcess) (rss, heap int64, err error) {
	// The heap first: its gc=1 collects, so the RSS read after it holds
	// no more garbage than the runtime keeps.
	var buf bytes.Buffer
	if err := pprofGet(s.Target.Pprof, "/debug/pprof/heap?gc=1&debug=1", &buf); err != nil {
		return 0, 0, err
	}
	if heap, err = memStat(&buf, "HeapAlloc"); err != nil {
		return 0, 0, err
	}
	rss, err = procRSS(s.PID)
	return rss, heap, err
}

// memStat finds "# name = value" in a debug=1 heap profile.
func memStat(r io.Reader, name string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	prefix := "# " + name + " = "
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(prefix)); ok {
			return strconv.ParseInt(string(rest), 10, 64)
		}
	}
	return 0, fmt.Errorf("bench: no %q in the heap profile", name)
}

// memoryAgents is how many agents (with a run each) the stored signals are
// spread over, so that 64 writers are not queued behind one actor.
const memoryAgents = 64

// MemoryPerSignal makes memoryAgents agents with a run each on s, then
// stores signals signals over them (64 in flight) and reports the growth.
func MemoryPerSignal(s *ServerProcess, signals int, progress io.Writer) (Memory, error) {
	m := Memory{Name: "per-signal", Items: signals}
	targets, cl, err := newTargets(s.Target, memoryAgents)
	if err != nil {
		return m, err
	}
	defer cl.hc.CloseIdleConnections()
	if m.RSSBefore, m.HeapBefore, err = measureMemory(s); err != nil {
		return m, err
	}
	if err := postSignals(cl, targets, signals, progress, "memory/per-signal"); err != nil {
		return m, err
	}
	m.RSSAfter, m.HeapAfter, err = measureMemory(s)
	return m, err
}

// MemoryPerIdleAgent creates agents agents on s (64 in flight), then
// leaves them idle, and reports the growth.
func MemoryPerIdleAgent(s *ServerProcess, agents int, progress io.Writer) (Memory, error) {
	m := Memory{Name: "per-idle-agent", Items: agents}
	cl, err := newClient(s.Target.HTTP, s.Target.Key, 64)
	if err != nil {
		return m, err
	}
	defer cl.hc.CloseIdleConnections()
	if m.RSSBefore, m.HeapBefore, err = measureMemory(s); err != nil {
		return m, err
	}
	l := Loop{C: 64, N: agents, CPU: s.CPU, Progress: progress, Label: "memory/per-idle-agent"}
	res, err := l.Run(func(w int) (Op, error) {
		return cl.postOp("/api/v1/agents", []byte(`{"name":"bench-idle"}`), 201), nil
	})
	if err == nil && res.Errors > 0 {
		err = fmt.Errorf("bench: %d agents not created, e.g. %w", res.Errors, res.FirstErr)
	}
	if err != nil {
		return m, err
	}
	time.Sleep(100 * time.Millisecond) // replies go before their bookkeeping ends
	m.RSSAfter, m.HeapAfter, err = measureMemory(s)
	return m, err
}

// newTargets makes n agents with a run each on t, and a client with 64
// connections.
func newTargets(t Target, n int) ([]target, *client, error) {
	cl, err := newClient(t.HTTP, t.Key, 64)
	if err != nil {
		return nil, nil, err
	}
	targets := make([]target, n)
	var next atomic.Int64 // setup runs exactly n operations: i covers 0..n-1
	err = setup(64, n, func(int) (Op, error) {
		return func() error {
			i := next.Add(1) - 1
			var err error
			targets[i], err = cl.newTarget(fmt.Sprintf("bench-%04d", i))
			return err
		}, nil
	})
	if err != nil {
		cl.hc.CloseIdleConnections()
		return nil, nil, fmt.Errorf("bench: agents: %w", err)
	}
	return targets, cl, nil
}

// postSignals posts n signals spread over targets, 64 in flight, each
// worker writing to the agents of its own share.
func postSignals(cl *client, targets []target, n int, progress io.Writer, label string) error {
	l := Loop{C: 64, N: n, Progress: progress, Label: label}
	res, err := l.Run(func(w int) (Op, error) {
		t := targets[w%len(targets)]
		return cl.postOp("/api/v1/agents/"+t.agent+"/signals", signalBody(t.run), 201), nil
	})
	if err == nil && res.Errors > 0 {
		err = fmt.Errorf("bench: %d of %d signals failed, e.g. %w", res.Errors, n, res.FirstErr)
	}
	return err
}
