package engine

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// A signal reads back from the compact log exactly as it was added,
// including what a record cannot hold: ids that are not "sig_" + a ULID as
// id.New writes it, and times outside Unix nanoseconds.
func TestSignalLogReadsBackWhatWasAdded(t *testing.T) {
	var l SignalLog
	l.addRun("run_01KB6ZQ2XJ0000000000000000")
	l.addRun("run_2")
	epoch := time.Unix(0, 0).UTC()
	signals := []Signal{
		{ID: "sig_01KB6ZQ2XJCQ3J0AWVMZ5ZQK7X", Kind: "human.rating", Value: 4, RunID: "run_01KB6ZQ2XJ0000000000000000",
			OccurredAt: t0, ReceivedAt: t0.Add(time.Nanosecond), Seq: 7},
		{ID: "sig_01kb6zq2xjcq3j0awvmz5zqk7y", Kind: "human.rating", Value: -0.5, RunID: "run_2", SessionID: "chat-7",
			DedupKey: "msg-1", OccurredAt: epoch, ReceivedAt: t0, Seq: 8},
		{ID: "sig_00000000000000000000000000", Kind: "external.ticket_closed", Value: 1, Object: "zendesk.ticket/42",
			OccurredAt: time.Date(9989, 12, 31, 23, 59, 59, 999999999, time.UTC), ReceivedAt: t0, Seq: 9},
		{ID: "custom", Kind: "zendesk.ticket/42", Value: math.MaxFloat64, Object: "human.rating", DedupKey: "msg-2",
			OccurredAt: time.Unix(0, math.MinInt64+5).UTC(), Seq: math.MaxUint64},
		{ID: "sig_01KB6ZQ2XJCQ3J0AWVMZ5ZQK80", Kind: "human.rating", RunID: "run_2", ReceivedAt: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	runs := map[string]int{"": -1, "run_01KB6ZQ2XJ0000000000000000": 0, "run_2": 1}
	for _, s := range signals {
		l.add(s, runs[s.RunID])
	}
	view := l.view()
	var kinds objective.Kinds
	kinds.Add(objective.Definition{Terms: []objective.Term{{Signal: "never.sent"}, {Signal: "external.ticket_closed"}, {Signal: "human.rating"}}})
	codes := l.names.codes(nil, &kinds)
	l.add(Signal{ID: "sig_late", Kind: "late", RunID: "run_2"}, 1)
	if view.Len() != len(signals) {
		t.Fatalf("a view has %d signals, want the %d added before it", view.Len(), len(signals))
	}
	for i, want := range signals {
		if got := view.At(i); !reflect.DeepEqual(got, want) {
			t.Errorf("signal %d:\n got %+v\nwant %+v", i, got, want)
		}
		var fromRecord, fromValue writer
		fromRecord.signalAt(&view, i)
		fromValue.signal(want)
		if !bytes.Equal(fromRecord, fromValue) {
			t.Errorf("signal %d encodes from its record as %x, from its value as %x", i, fromRecord, fromValue)
		}
		got := view.appendObserved(nil, []int32{int32(i)}, codes)
		observed := kinds.Observe(objective.Signal{Kind: want.Kind, Value: want.Value, OccurredAt: want.OccurredAt,
			ReceivedAt: want.ReceivedAt, Seq: want.Seq})
		if len(got) != 1 || got[0] != observed {
			t.Errorf("signal %d is observed from its record as %+v, from its value as %+v", i, got, observed)
		}
	}
	if i, ok := l.byDedupKey("msg-2"); !ok || i != 3 {
		t.Errorf("dedup key msg-2 finds %d, %v; want signal 3", i, ok)
	}
	if got := l.ofObject("human.rating"); !reflect.DeepEqual(got, []int32{3}) {
		t.Errorf("signals of object human.rating (also a kind) = %v, want [3]", got)
	}
	if got := l.ofRun(1); !reflect.DeepEqual(got, []int32{1, 4, 5}) {
		t.Errorf("signals of run_2 = %v, want [1 4 5]", got)
	}
}

func TestSignalOfUnknownRunDoesNotApply(t *testing.T) {
	h := newHarness(t)
	ev := SignalRecorded{Signal: Signal{ID: "sig_1", Kind: "k", RunID: "run_unknown", ReceivedAt: t0}}
	if err := h.a.Replay(h.a.LastSeq()+1, ev); err == nil {
		t.Fatal("a signal of an unknown run was replayed")
	}
	if st := h.a.Snapshot(); st.Signals.Len() != 0 {
		t.Fatalf("a refused signal left %d signals", st.Signals.Len())
	}
}

// TestSignalMemoryBudget holds the layout to the target: at most
// 250 heap bytes per stored signal, indexes included.
func TestSignalMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100k signals")
	}
	if got := heapSignals(t, memoryShape{signals: 100_000, runs: 1_000}); got > 250 {
		t.Fatalf("%.0f heap bytes per stored signal, want at most 250", got)
	}
}
