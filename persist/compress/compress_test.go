package compress

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/plaudit/plaudit/persist"
)

// TestRoundTrip: what Encoders compresses, Decoder gives back byte for
// byte, after whatever dst held, and an empty state comes back empty but
// not nil.
func TestRoundTrip(t *testing.T) {
	var enc Encoders
	dec := newDecoder(t, 16<<20)
	for _, tc := range []struct {
		name  string
		state []byte
	}{
		{"empty", []byte{}},
		{"small", []byte("one signal")},
		{"repetitive", bytes.Repeat([]byte("agt_01 run_01 kind value "), 20_000)},
		{"incompressible", noise(300_000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("header")
			frame, n, err := enc.Append(append([]byte(nil), prefix...), persist.Bytes(tc.state))
			if err != nil || n != int64(len(tc.state)) {
				t.Fatalf("Append: %d bytes written, %v; want %d", n, err, len(tc.state))
			}
			if !bytes.HasPrefix(frame, prefix) {
				t.Fatalf("Append overwrote dst")
			}
			got, err := dec.Decode(frame[len(prefix):])
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !bytes.Equal(got, tc.state) {
				t.Fatalf("decoded %d bytes (nil: %t), want the %d written", len(got), got == nil, len(tc.state))
			}
		})
	}
}

// TestDecodeRefuses: a frame that is not zstd, one cut short and one whose
// state is over the decoder's cap are errors, not states.
func TestDecodeRefuses(t *testing.T) {
	var enc Encoders
	const capped = 5 << 20 // above the 4 MiB window the frames ask for
	frame, _, err := enc.Append(nil, persist.Bytes(bytes.Repeat([]byte("x"), capped+1)))
	if err != nil {
		t.Fatal(err)
	}
	dec := newDecoder(t, capped)
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error // nil: any error
	}{
		{"not zstd", []byte("plainly not a zstd frame"), nil},
		{"cut short", frame[:len(frame)/2], nil},
		{"over the cap", frame, zstd.ErrDecoderSizeExceeded},
	} {
		state, err := dec.Decode(tc.frame)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: decoded %d bytes, %v; want an error (%v)", tc.name, len(state), err, tc.want)
		}
	}
}

// TestConcurrentUse: one Encoders and one Decoder serve many goroutines,
// as a store's agents share them (run with -race).
func TestConcurrentUse(t *testing.T) {
	var enc Encoders
	dec := newDecoder(t, 16<<20)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			state := bytes.Repeat([]byte{byte('a' + g)}, 10_000+g)
			for range 20 {
				frame, _, err := enc.Append(nil, persist.Bytes(state))
				if err != nil {
					errs <- err.Error()
					return
				}
				if got, err := dec.Decode(frame); err != nil || !bytes.Equal(got, state) {
					errs <- "a state came back changed"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func newDecoder(t *testing.T, maxState uint64) *Decoder {
	t.Helper()
	dec, err := NewDecoder(maxState)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dec.Close)
	return dec
}

// noise is n bytes of a xorshift stream: fixed, and incompressible.
func noise(n int) []byte {
	b := make([]byte, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// FuzzDecode: whatever a stored frame holds, Decode answers an error or a
// state, never nil and within the cap; and what Encoders compresses of
// any input comes back as that input.
func FuzzDecode(f *testing.F) {
	var enc Encoders
	frame := func(state []byte) []byte {
		fr, _, err := enc.Append(nil, persist.Bytes(state))
		if err != nil {
			f.Fatal(err)
		}
		return fr
	}
	f.Add(frame(nil))
	f.Add(frame([]byte("one signal")))
	f.Add(frame(bytes.Repeat([]byte("agt_01 run_01 "), 2_000)))
	f.Add(frame(noise(5_000)))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd}) // zstd's magic number, and nothing else
	f.Add([]byte("plainly not a zstd frame"))
	const capped = 8 << 20 // above the 4 MiB window Encoders' frames ask for
	dec, err := NewDecoder(capped)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(dec.Close)
	f.Fuzz(func(t *testing.T, data []byte) {
		if state, err := dec.Decode(data); err == nil && (state == nil || len(state) > capped) {
			t.Fatalf("decoded a state of %d bytes (nil: %t), cap %d", len(state), state == nil, capped)
		}
		fr, _, err := enc.Append(nil, persist.Bytes(data))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := dec.Decode(fr); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes came back as %d, %v", len(data), len(got), err)
		}
	})
}
