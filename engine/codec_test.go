package engine

import (
	"errors"
	"reflect"
	"testing"
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
	h := buildHistory(t)
	st := h.a.Snapshot()
	got, err := DecodeState(AppendState(nil, st))
	if err != nil {
		t.Fatal(err)
	}
	restored, err := Restore(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored, h.a) {
		t.Fatal("agent restored from an encoded snapshot differs from the live agent")
	}
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

// FuzzDecodeEvent: arbitrary bytes never panic, and whatever decodes
// re-encodes to the same bytes.
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
		_, _ = DecodeState(b)
	})
}
