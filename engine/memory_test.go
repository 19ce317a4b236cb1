package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The memory an agent keeps, measured as the live heap after a collection:
// the bytes a stored signal adds (its record and its share of the
// indexes), and the bytes of an agent with no runs and no signals.

// memoryShape is a served agent's signals: mostly run signals of a few
// kinds, some sent to claimed objects or to sessions, some with a dedup key.
// Every string is a fresh copy, as decoding a request or a log record makes it.
type memoryShape struct {
	signals, runs int
}

var memoryKinds = []string{"human.rating", "human.approval", "external.ticket_closed", "ci.tests",
	"judge.score", "latency_ms", "tokens.output", "user.thumbs"}

// memoryAgent is an agent filled for a memory figure: exec runs a command
// at now, which the caller moves on.
type memoryAgent struct {
	tb  testing.TB
	a   *Agent
	now time.Time
	rnd *rand.Rand
}

// newMemoryAgent creates the agent, with the named variations.
func newMemoryAgent(tb testing.TB, variations ...string) *memoryAgent {
	m := &memoryAgent{tb: tb, a: NewAgent(), now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		rnd: rand.New(rand.NewPCG(1, 2))}
	m.exec(CreateAgent{ID: "agt_memory", Workspace: "default", Name: "memory"})
	for _, name := range variations {
		m.exec(CreateVariation{Name: name})
	}
	return m
}

func (m *memoryAgent) exec(cmd any) any {
	m.tb.Helper()
	res, _, err := executeAny(m.a, cmd, m.now, m.rnd)
	if err != nil {
		m.tb.Fatalf("%T: %v", cmd, err)
	}
	return res
}

// heapSignals stores the shape's signals into an agent that already has its
// runs and returns the heap bytes they added, per signal.
func heapSignals(tb testing.TB, shape memoryShape) float64 {
	tb.Helper()
	m := newMemoryAgent(tb)
	runs := make([]string, shape.runs)
	objects := make([]string, shape.runs)
	sessions := make([]string, shape.runs)
	for i := range runs {
		session := ""
		if i%10 == 0 {
			session = fmt.Sprintf("chat-%d", i)
		}
		runs[i] = m.exec(CreateRun{Version: "3", SessionID: session}).(CreatedRun).Run.ID
		objects[i] = fmt.Sprintf("zendesk.ticket/%d", 40000+i)
		m.exec(ClaimObject{RunID: runs[i], Object: objects[i]})
		if session != "" {
			m.exec(FinishRun{RunID: runs[i], Succeeded: true})
			sessions[i] = session
		}
	}
	before := liveHeap()
	for i := range shape.signals {
		m.now = m.now.Add(time.Millisecond)
		r := i % shape.runs
		c := RecordSignal{Kind: strings.Clone(memoryKinds[i%len(memoryKinds)]), Value: float64(i % 5)}
		switch {
		case i%10 == 3:
			c.Object = strings.Clone(objects[r])
		case i%10 == 7 && sessions[r] != "":
			c.SessionID = strings.Clone(sessions[r])
		default:
			c.RunID = strings.Clone(runs[r])
		}
		if i%4 == 0 {
			c.DedupKey = fmt.Sprintf("msg-%d-%d", r, i)
		}
		m.exec(c)
	}
	after := liveHeap()
	runtime.KeepAlive(m.a)
	return float64(after-before) / float64(shape.signals)
}

// heapFeedback records n feedback records (a score each, one in five with a
// comment) over runs runs into an agent that already has its runs and two
// variations, and returns the heap bytes they added, per record: the record
// and the feedback signal each one appends to its run.
func heapFeedback(tb testing.TB, n, runs int) float64 {
	tb.Helper()
	m := newMemoryAgent(tb, "short", "long")
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = m.exec(CreateRun{Version: "3"}).(CreatedRun).Run.ID
	}
	before := liveHeap()
	for i := range n {
		m.now = m.now.Add(time.Millisecond)
		score := float64(i%3) - 1
		c := RecordFeedback{RunID: strings.Clone(ids[i%runs]), Score: &score}
		if i%5 == 0 {
			c.Comment = fmt.Sprintf("answer %d was fine", i)
		}
		m.exec(c)
	}
	after := liveHeap()
	runtime.KeepAlive(m.a)
	return float64(after-before) / float64(n)
}

// heapRuns creates n runs (selections of two variations, no labels or
// claims) and returns the heap bytes they added, per run.
func heapRuns(tb testing.TB, n int) float64 {
	tb.Helper()
	m := newMemoryAgent(tb, "short", "long")
	before := liveHeap()
	for range n {
		m.now = m.now.Add(time.Millisecond)
		m.exec(CreateRun{Version: "3"})
	}
	after := liveHeap()
	runtime.KeepAlive(m.a)
	return float64(after-before) / float64(n)
}

// heapIdleAgents returns the heap bytes of one created agent with nothing
// in it, averaged over n.
func heapIdleAgents(tb testing.TB, n int) float64 {
	tb.Helper()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	agents := make([]*Agent, n)
	before := liveHeap()
	for i := range agents {
		a := NewAgent()
		if _, _, err := a.CreateAgent(CreateAgent{ID: fmt.Sprintf("agt_%d", i), Workspace: "default", Name: "idle"}, now); err != nil {
			tb.Fatal(err)
		}
		agents[i] = a
	}
	after := liveHeap()
	runtime.KeepAlive(agents)
	return float64(after-before) / float64(n)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSignalMemory reports the heap bytes per stored signal (100k
// signals over 1,000 runs), per feedback record (100k over 1,000 runs), per
// run (100k selections) and per idle agent. The time per op is not the
// figure: it is the whole build.
func BenchmarkSignalMemory(b *testing.B) {
	var perSignal, perFeedback, perRun, perReport, perAgent float64
	for b.Loop() {
		perSignal = heapSignals(b, memoryShape{signals: 100_000, runs: 1_000})
		perFeedback = heapFeedback(b, 100_000, 1_000)
		perRun = heapRuns(b, 100_000)
		perReport = heapReports(b, 100_000)
		perAgent = heapIdleAgents(b, 10_000)
	}
	b.ReportMetric(perSignal, "B/signal")
	b.ReportMetric(perFeedback, "B/feedback")
	b.ReportMetric(perRun, "B/run")
	b.ReportMetric(perReport, "B/report")
	b.ReportMetric(perAgent, "B/idle-agent")
}
