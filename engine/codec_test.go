package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestEventCodecRoundTrip(t *testing.T) {
	h := buildHistory(t)
	seen := map[eventType]bool{}
	for _, ev := range h.events {
		seen[ev.eventType()] = true
		b := AppendEvent(nil, ev)
		got, err := DecodeEvent(b)
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		if !reflect.DeepEqual(got, ev) {
			t.Fatalf("%T round trip:\n got %+v\nwant %+v", ev, got, ev)
		}
	}
	if len(seen) != int(evReportRecorded) {
		t.Fatalf("history covers %d event types, want all %d", len(seen), evReportRecorded)
	}
}

func TestStateCodecRoundTrip(t *testing.T) {
	restoresAsLive(t, buildHistory(t).a)
}

// restoresAsLive fails unless a restore from an encoded snapshot of a is
// a, indexes included.
func restoresAsLive(t *testing.T, a *Agent) {
	t.Helper()
	got, err := DecodeState(AppendState(nil, a.Snapshot()))
	if err != nil {
		t.Fatal(err)
	}
	restored, err := Restore(got)
	if err != nil {
		t.Fatal(err)
	}
	if !sameAgent(restored, a) {
		t.Fatal("agent restored from an encoded snapshot differs from the live agent")
	}
}

// A snapshot keeps the signal times at the low end of Unix nanoseconds,
// which a log holds beside its records (farTimes), and refuses a signal of
// a run it does not hold.
func TestStateCodecEdges(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	for _, at := range []time.Time{time.Unix(0, math.MinInt64).UTC(), time.Unix(0, math.MinInt64+5).UTC(),
		time.Unix(0, int64(farStamps)).UTC(), t0} {
		h.signal(RecordSignal{Kind: "k", Value: 1, RunID: r.ID, OccurredAt: at})
	}
	if n := len(h.a.signals.farTimes); n != 2 {
		t.Fatalf("%d far times, want the 2 below farStamps", n)
	}
	restoresAsLive(t, h.a)

	var l SignalLog
	l.addRun("run_gone")
	l.add(Signal{ID: "sig_x", Kind: "k", RunID: "run_gone"}, 0)
	if _, err := DecodeState(AppendState(nil, State{Seq: 1, Signals: l.view()})); !errors.Is(err, ErrDecode) {
		t.Fatalf("a snapshot with a signal of a run it does not hold decodes: %v", err)
	}
}

// WriteState writes what AppendState appends, however small its chunks,
// and stops at its writer's first error.
func TestWriteStateMatchesAppendState(t *testing.T) {
	st := buildHistory(t).a.Snapshot()
	want := AppendState(nil, st)
	for _, chunk := range []int{1, 7, 100, stateChunk} {
		var buf bytes.Buffer
		n, err := writeState(&buf, st, chunk)
		if err != nil || n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("chunks of %d: wrote %d bytes (err %v), equal %v; want the %d bytes of AppendState",
				chunk, n, err, bytes.Equal(buf.Bytes(), want), len(want))
		}
	}
	broken := errors.New("disk on fire")
	w := &failingWriter{room: len(want) / 2, err: broken}
	if n, err := writeState(w, st, 16); !errors.Is(err, broken) || n > int64(len(want)/2) {
		t.Errorf("writeState to a writer failing after %d bytes = %d, %v", len(want)/2, n, err)
	}
}

type failingWriter struct {
	room int
	err  error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.room {
		n := w.room
		w.room = 0
		return n, w.err
	}
	w.room -= len(p)
	return len(p), nil
}

func TestDecodeRejectsDamage(t *testing.T) {
	h := buildHistory(t)
	good := AppendEvent(nil, h.events[1])
	cases := map[string][]byte{
		"empty":        nil,
		"wrong format": append([]byte{9}, good[1:]...),
		"unknown type": append([]byte{codecVersion, 99}, good[2:]...),
		"truncated":    good[:len(good)-3],
		"trailing":     append(append([]byte{}, good...), 0),
		"huge length":  {codecVersion, byte(evRunFinished), 0xff, 0xff, 0xff, 0xff, 0x0f},
	}
	for name, b := range cases {
		if _, err := DecodeEvent(b); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: err = %v, want ErrDecode", name, err)
		}
	}
	if _, err := DecodeState(good); !errors.Is(err, ErrDecode) {
		t.Errorf("an event decoded as a snapshot: err = %v", err)
	}
}

// FuzzDecodeEvent: arbitrary bytes never panic, as an event or as a
// snapshot restored, and whatever decodes as an event re-encodes to the
// same bytes.
func FuzzDecodeEvent(f *testing.F) {
	h := buildHistory(&testing.T{})
	for _, ev := range h.events {
		f.Add(AppendEvent(nil, ev))
	}
	f.Add(AppendState(nil, h.a.Snapshot()))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvent(b)
		if err == nil {
			again, err := DecodeEvent(AppendEvent(nil, ev))
			if err != nil || !reflect.DeepEqual(again, ev) {
				t.Fatalf("re-encoded event does not decode to itself: %v", err)
			}
		}
		if st, err := DecodeState(b); err == nil {
			_, _ = Restore(st)
		}
	})
}

// errPanic marks a decoder panic that decodeNoPanic turned into an error.
var errPanic = errors.New("decoder panicked")

// decodeNoPanic is DecodeEvent with a panic turned into an errPanic the test
// can report with the input that caused it.
func decodeNoPanic(b []byte) (ev Event, err error) {
	defer func() {
		if p := recover(); p != nil {
			ev, err = nil, fmt.Errorf("%w: %v", errPanic, p)
		}
	}()
	return DecodeEvent(b)
}

// TestDecodeRefusesCutAndCorruptedEvents: for an encoding of every event
// type, every cut short of its end is ErrDecode (never a shorter event with
// zero fields), and a length, count, tag or number overwritten or spliced in
// at any position is ErrDecode or an event that encodes back to the very
// bytes it came from, never a panic.
func TestDecodeRefusesCutAndCorruptedEvents(t *testing.T) {
	h := buildHistory(t)
	encodings := map[eventType][]byte{}
	for _, ev := range h.events {
		if _, ok := encodings[ev.eventType()]; !ok {
			encodings[ev.eventType()] = AppendEvent(nil, ev)
		}
	}
	// Replacements for one byte: a varint that goes on, the largest byte, a
	// one-byte length past the end of any of these encodings, a bad bool or
	// time tag.
	overwrites := []byte{0x80, 0xff, 0x7f, 0x02}
	// Splices in place of one byte: a length beyond maxDecodeLen, one
	// exactly at it, a varint that overflows 64 bits.
	splices := [][]byte{
		binary.AppendUvarint(nil, maxDecodeLen+1),
		binary.AppendUvarint(nil, maxDecodeLen),
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	// Numbers the engine never stores, written over 8 bytes.
	nonFinite := [][]byte{
		binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN())),
		binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.Inf(-1))),
	}
	check := func(typ eventType, what string, b []byte) {
		t.Helper()
		ev, err := decodeNoPanic(b)
		switch {
		case err != nil && !errors.Is(err, ErrDecode):
			t.Fatalf("event type %d, %s: err = %v, want ErrDecode", typ, what, err)
		case err == nil && !allFinite(reflect.ValueOf(ev)):
			t.Fatalf("event type %d, %s: decoded %+v, which holds a number the engine never stores", typ, what, ev)
		case err == nil && typ == evObjectivePut:
			// The definition is JSON, re-rendered canonically and with
			// unknown members ignored: it need only decode to itself.
			again, err := DecodeEvent(AppendEvent(nil, ev))
			if err != nil || !reflect.DeepEqual(again, ev) {
				t.Fatalf("event type %d, %s: decoded %+v, which does not decode to itself (%v)", typ, what, ev, err)
			}
		case err == nil:
			// Anything else that decodes used every byte as written: a tag
			// read as something else would encode differently.
			if again := AppendEvent(nil, ev); !bytes.Equal(again, b) {
				t.Fatalf("event type %d, %s: decoded %+v, which encodes to %q, not to the %q it came from", typ, what, ev, again, b)
			}
		}
	}
	for typ := evAgentCreated; typ <= evReportRecorded; typ++ {
		good, ok := encodings[typ]
		if !ok {
			t.Fatalf("history has no event of type %d", typ)
		}
		for n := range len(good) {
			if _, err := decodeNoPanic(good[:n]); !errors.Is(err, ErrDecode) {
				t.Fatalf("event type %d cut to %d of %d bytes: err = %v, want ErrDecode", typ, n, len(good), err)
			}
		}
		for i := 2; i < len(good); i++ {
			for _, c := range overwrites {
				b := slices.Clone(good)
				b[i] = c
				check(typ, fmt.Sprintf("byte %d set to %#x", i, c), b)
			}
			for _, s := range splices {
				b := slices.Concat(good[:i], s, good[i+1:])
				check(typ, fmt.Sprintf("byte %d replaced by %x", i, s), b)
			}
			for _, f := range nonFinite {
				if i+len(f) <= len(good) {
					b := slices.Clone(good)
					copy(b[i:], f)
					check(typ, fmt.Sprintf("bytes %d on set to %x", i, f), b)
				}
			}
		}
	}
}

// allFinite reports whether every float64 reachable from v is finite.
func allFinite(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Float64:
		return !math.IsNaN(v.Float()) && !math.IsInf(v.Float(), 0)
	case reflect.Pointer, reflect.Interface:
		return v.IsNil() || allFinite(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if !allFinite(v.Field(i)) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if !allFinite(v.Index(i)) {
				return false
			}
		}
	}
	return true
}

// TestDecodeRefusesCutSnapshots: every cut of a snapshot short of its end is
// ErrDecode, never a panic or a smaller state.
func TestDecodeRefusesCutSnapshots(t *testing.T) {
	good := AppendState(nil, buildHistory(t).a.Snapshot())
	for n := range len(good) {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("snapshot cut to %d of %d bytes: panic %v", n, len(good), p)
				}
			}()
			if _, err := DecodeState(good[:n]); !errors.Is(err, ErrDecode) {
				t.Fatalf("snapshot cut to %d of %d bytes: err = %v, want ErrDecode", n, len(good), err)
			}
		}()
	}
}

// TestDecodeRefusesUnknownSnapshotFormats: a snapshot of a format this
// build does not know is ErrDecode, not read as the current one.
func TestDecodeRefusesUnknownSnapshotFormats(t *testing.T) {
	// A fresh agent's snapshot has no claims, whose sequence numbers alone
	// tell format 1 from 2: read as either, it would decode.
	for name, a := range map[string]*Agent{"fresh": newHarness(t).a, "history": buildHistory(t).a} {
		good := AppendState(nil, a.Snapshot())
		for _, format := range []byte{0, snapshotV3 + 1, 0xff} {
			b := slices.Clone(good)
			b[0] = format
			if _, err := DecodeState(b); !errors.Is(err, ErrDecode) {
				t.Errorf("%s snapshot, format %d: err = %v, want ErrDecode", name, format, err)
			}
		}
	}
}
