package engine

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// A report reads back from the table exactly as it was set, including what
// a record cannot hold (an id that is not "rpt_" + a ULID, a kind not seed
// 001's, times outside Unix nanoseconds), and a replacement takes its
// place, number included, without showing in a view taken before it.
func TestReportTableReadsBackWhatWasSet(t *testing.T) {
	var runs runTable
	runs.add(Run{ID: "run_01KB6ZQ2XJ0000000000000000", AgentID: "agt_1"})
	runs.add(Run{ID: "run_2", AgentID: "agt_1"})
	far := time.Date(9989, 12, 31, 23, 59, 59, 999999999, time.UTC)
	reports := []Report{
		{ID: "rpt_01KB6ZQ2XJCQ3J0AWVMZ5ZQK7X", RunID: "run_01KB6ZQ2XJ0000000000000000", Kind: ReportExternal, Scorer: "ci.tests",
			TurnID: "t1", Value: ptr(0.5), Weight: 1, CreatedAt: t0, UpdatedAt: t0, Started: 3, Seq: 9},
		{ID: "rpt_01KB6ZQ2XJCQ3J0AWVMZ5ZQK7Y", RunID: "run_2", Kind: ReportChoice, Scorer: "choice", TurnID: "t1", TraceID: "tr-1",
			Weight: 2, Shown: `["a","b"]`, Chosen: `"a"`, Prompt: "pick", CreatedAt: t0, UpdatedAt: t0.Add(time.Second), Seq: 10},
		{ID: "custom", RunID: "run_2", Kind: "another", Scorer: "review", Detail: `{"why":"ok"}`, Value: ptr(-1),
			CreatedAt: far, UpdatedAt: time.Unix(0, 0).UTC(), Seq: 11},
		{ID: "rpt_01KB6ZQ2XJCQ3J0AWVMZ5ZQK80", RunID: "run_2", Kind: ReportReview, Scorer: "review", TurnID: "t2",
			Value: ptr(2.5), UpdatedAt: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	var tbl reportTable
	for _, rep := range reports {
		run, _ := runs.find(rep.RunID)
		tbl.set(rep, run)
	}
	view := tbl.view()
	var kinds objective.Kinds
	kinds.Add(objective.Definition{Terms: []objective.Term{{Signal: "review"}, {Signal: "ci.tests"}}})
	codes := tbl.names.codes(nil, &kinds)
	replaced := reports[2]
	replaced.Detail, replaced.Kind, replaced.CreatedAt, replaced.Value, replaced.Seq = "", ReportReview, t0, nil, 12
	tbl.set(replaced, 1)
	for n, want := range reports {
		if got := view.at(n, &runs); !reflect.DeepEqual(got, want) {
			t.Errorf("report %d in the view:\n got %+v\nwant %+v", n, got, want)
		}
		var fromRecord, fromValue writer
		fromRecord.reportAt(&view, n, &runs)
		fromValue.report(want)
		if !bytes.Equal(fromRecord, fromValue) {
			t.Errorf("report %d encodes from its record as %x, from its value as %x", n, fromRecord, fromValue)
		}
		got := view.appendObserved(nil, n, codes, math.MaxUint64, objective.Instant{}, false)
		if valued := len(got) == 1; len(got) > 1 || valued != (want.Value != nil) {
			t.Errorf("report %d observed as %v, want a signal: %v", n, got, want.Value != nil)
		} else if valued {
			observed := kinds.Observe(objective.Signal{Kind: want.Scorer, Value: *want.Value, OccurredAt: want.UpdatedAt,
				ReceivedAt: want.UpdatedAt, Seq: want.Seq})
			if got[0] != observed {
				t.Errorf("report %d is observed from its record as %+v, from its value as %+v", n, got[0], observed)
			}
		}
	}
	var fromRecord, fromValue writer
	fromRecord.reportAt(&tbl, 2, &runs)
	fromValue.report(replaced)
	if !bytes.Equal(fromRecord, fromValue) {
		t.Errorf("the replacement encodes from its record as %x, from its value as %x", fromRecord, fromValue)
	}
	if n, ok := tbl.find(1, "review", ""); !ok || n != 2 {
		t.Fatalf("the replaced report is %d, %v; want 2", n, ok)
	}
	if got := tbl.at(2, &runs); !reflect.DeepEqual(got, replaced) {
		t.Errorf("the replacement:\n got %+v\nwant %+v", got, replaced)
	}
	if tbl.len() != len(reports) || !reflect.DeepEqual(tbl.ofRun(1), []int32{1, 2, 3}) {
		t.Errorf("%d reports, run 2's %v", tbl.len(), tbl.ofRun(1))
	}
	if _, ok := tbl.find(0, "review", ""); ok {
		t.Error("found a report of run 1 under run 2's key")
	}
}

// A replacement that drops what a report had leaves the table laid out as
// one in which the report never had it: live apply and restore agree.
func TestReportTableForgetsWhatAReplacementDrops(t *testing.T) {
	var runs runTable
	runs.add(Run{ID: "run_1", AgentID: "agt_1"})
	rep := Report{ID: "rpt_01KB6ZQ2XJCQ3J0AWVMZ5ZQK7X", RunID: "run_1", Kind: ReportReview, Scorer: "review",
		Detail: `{"why":"ok"}`, CreatedAt: t0, UpdatedAt: t0}
	var live, fresh reportTable
	live.set(rep, 0)
	_ = live.view()
	rep.Detail = ""
	live.set(rep, 0)
	fresh.set(rep, 0) // as often, so that both keep one earlier version
	fresh.set(rep, 0)
	live.recs.shared, live.extras.shared, live.earlier.shared = nil, nil, nil
	fresh.earlier.shared = nil
	if !reflect.DeepEqual(live, fresh) {
		t.Fatalf("replaced:\n%+v\nset once:\n%+v", live, fresh)
	}
}

// TestReportMemoryBudget holds the layout to its figure: a standing report
// on a turn of its own, its key and its share of the indexes in at most
// 220 heap bytes.
func TestReportMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100k reports")
	}
	if got := heapReports(t, 100_000); got > 220 {
		t.Fatalf("%.0f heap bytes per report, want at most 220", got)
	}
}

func heapReports(tb testing.TB, n int) float64 {
	tb.Helper()
	m := newMemoryAgent(tb, "short", "long")
	m.exec(CreateRun{})
	run := m.a.runs.id(0)
	before := liveHeap()
	for i := range n {
		m.exec(ReportReward{RunID: run, Kind: ReportExternal, Scorer: "ci.tests", TurnID: fmt.Sprint("turn-", i),
			Value: ptr(0.5), Weight: 1, Started: uint64(i + 1)})
	}
	after := liveHeap()
	runtime.KeepAlive(m.a)
	return float64(after-before) / float64(n)
}
