package engine

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// A run reads back from the table exactly as it was added, including what
// a record cannot hold: times outside Unix nanoseconds or not in UTC, an
// agent id not the table's, ids that are not "run_" + a ULID, and empty
// labels and claims that are not nil.
func TestRunTableReadsBackWhatWasAdded(t *testing.T) {
	far := time.Date(9989, 12, 31, 23, 59, 59, 999999999, time.UTC)
	paris := time.FixedZone("CET", 3600)
	runs := []Run{
		{ID: "run_01KB6ZQ2XJ0000000000000000", AgentID: "agt_1", Version: "v1", VariationID: "var_a", ProfileID: "profile_1", CreatedAt: t0},
		{ID: "run_01KB6ZQ2XJ0000000000000001", AgentID: "agt_1", Version: "v1", SessionID: "chat-7", ExternalID: "ext-1",
			Labels: map[string]string{"team": "a"}, CreatedAt: t0.Add(time.Second), Finished: true, Succeeded: true, FinishedAt: t0.Add(2 * time.Second),
			Claims: []Claim{{Object: "ticket/1", CreatedAt: t0, Seq: 4}}, Traces: []Trace{{TraceID: "tr-1", TurnID: "tu-1", CreatedAt: t0}}},
		{ID: "run_2", AgentID: "agt_other", CreatedAt: far, Finished: true, FinishedAt: far},
		{ID: "run_01kb6zq2xj0000000000000003", AgentID: "", Labels: map[string]string{}, Claims: []Claim{}, Traces: []Trace{},
			CreatedAt: t0.In(paris), Finished: true, FinishedAt: time.Unix(0, 0).UTC()},
		{ID: "run_01KB6ZQ2XJ0000000000000004", AgentID: "agt_1", Finished: false, Succeeded: true, FinishedAt: t0},
	}
	var tbl runTable
	for _, r := range runs {
		tbl.add(r)
	}
	view := tbl.view()
	tbl.finish(0, true, far)
	tbl.mutExtra(1).claims = append(tbl.mutExtra(1).claims, Claim{Object: "ticket/2"})
	tbl.add(Run{ID: "run_late", AgentID: "agt_1"})
	if view.len() != len(runs) {
		t.Fatalf("a view has %d runs, want the %d added before it", view.len(), len(runs))
	}
	for i, want := range runs {
		if got := view.at(i); !reflect.DeepEqual(got, want) {
			t.Errorf("run %d:\n got %+v\nwant %+v", i, got, want)
		}
		if n, ok := tbl.find(want.ID); !ok || n != i {
			t.Errorf("find(%s) = %d, %v; want %d", want.ID, n, ok, i)
		}
	}
	if got := tbl.at(0); !got.Finished || !got.Succeeded || got.FinishedAt != far {
		t.Errorf("run 0 finished at %v: %+v", far, got)
	}
	if got := tbl.claims(1); len(got) != 2 || got[1].Object != "ticket/2" {
		t.Errorf("run 1's claims after a second: %+v", got)
	}
	if n, ok := tbl.find("run_unknown"); ok || n != -1 {
		t.Errorf("find of an unknown run = %d, %v", n, ok)
	}
}

// Views taken along a long history keep their moment while the table
// changes runs in every block, records and extras alike, and appends.
func TestRunTableViewsKeepTheirMoment(t *testing.T) {
	var tbl runTable
	type moment struct {
		view runTable
		runs []Run
	}
	var moments []moment
	n := 2*chunkLen + sparseBlockLen + 5
	for i := range n {
		tbl.add(Run{ID: fmt.Sprintf("run_%d", i), AgentID: "agt_1", Version: fmt.Sprint(i % 3), CreatedAt: t0})
		if i%7 == 3 {
			j := i / 2
			x := tbl.mutExtra(j)
			x.traces = append(x.traces, Trace{TraceID: fmt.Sprint(i)})
			if !tbl.at(j).Finished {
				tbl.finish(j, i%2 == 0, t0.Add(time.Duration(i)))
			}
		}
		if i%(chunkLen/2) == 0 || i == n-1 {
			m := moment{view: tbl.view()}
			for r := range tbl.All() {
				m.runs = append(m.runs, r)
			}
			moments = append(moments, m)
		}
	}
	for k, m := range moments {
		for i, want := range m.runs {
			if got := m.view.at(i); !reflect.DeepEqual(got, want) {
				t.Fatalf("view %d, run %d:\n got %+v\nwant %+v", k, i, got, want)
			}
		}
	}
}

// TestRunMemoryBudget holds the layout to its figure: a run, its id and its
// share of the indexes in at most 150 heap bytes (163 when it was laid out,
// 135 since a run's id carries its number and the index keeps no entry for
// it; a *Run each took 345).
func TestRunMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100k runs")
	}
	if got := heapRuns(t, 100_000); got > 150 {
		t.Fatalf("%.0f heap bytes per run, want at most 150", got)
	}
}
