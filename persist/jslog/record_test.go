package jslog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/plaudit/plaudit/persist"
)

func TestABatchRecordRoundTripsAndItsDamageIsCaught(t *testing.T) {
	b := persist.Batch{Agent: "agt_a", First: 300, Events: [][]byte{[]byte("e1"), {}, bytes.Repeat([]byte{0xff}, 200)},
		Index: []persist.KV{{Key: []byte("run/r1"), Value: []byte("agt_a")}, {Key: []byte("deleted")}, {Key: []byte("empty"), Value: []byte{}}}}
	rec := encodeBatch(b)
	got, err := decodeBatch("agt_a", rec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("decoded %+v, want %+v", got, b)
	}
	for i := range rec {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x10
		if _, err := decodeBatch("agt_a", bad); !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
	for n := range len(rec) {
		if _, err := decodeBatch("agt_a", rec[:n]); !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("cut to %d bytes: %v, want ErrCorrupt", n, err)
		}
	}
}

// FuzzDecodeBatch: no record body panics the decoder or makes it allocate
// beyond its input, and whatever it accepts encodes back to the same bytes.
// The fuzzer writes bodies; the checksum is added, or it would stop almost
// every input before the parser.
func FuzzDecodeBatch(f *testing.F) {
	body := func(b persist.Batch) []byte { rec := encodeBatch(b); return rec[:len(rec)-4] }
	f.Add(body(persist.Batch{Agent: "a", First: 1, Events: [][]byte{[]byte("x")}}))
	f.Add(body(persist.Batch{Agent: "a", First: 7, Events: [][]byte{{}, []byte("yy")},
		Index: []persist.KV{{Key: []byte("k")}, {Key: []byte("k2"), Value: []byte("v")},
			{Key: []byte("runext/default/x"), Value: []byte("run_1"), Unique: true}}}))
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{1, 0x81, 0x00, 1, 1, 'x', 0}) // first = 1, overlong
	f.Fuzz(func(t *testing.T, data []byte) {
		rec := binary.BigEndian.AppendUint32(bytes.Clone(data), crc32.Checksum(data, castagnoli))
		b, err := decodeBatch("a", rec)
		if err != nil {
			if !errors.Is(err, persist.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := encodeBatch(b); !bytes.Equal(again, rec) {
			t.Fatalf("accepted %x, which encodes back as %x", rec, again)
		}
	})
}

// Lengths and sequences at the edges of a varint's bytes decode back.
func TestRecordsWithVarintEdgesRoundTrip(t *testing.T) {
	for _, n := range []int{127, 128, 16383, 16384} {
		b := persist.Batch{Agent: "a", First: uint64(n), Events: [][]byte{bytes.Repeat([]byte{'x'}, n)}}
		got, err := decodeBatch("a", encodeBatch(b))
		if err != nil || !reflect.DeepEqual(got, b) {
			t.Fatalf("a batch at %d with an event of %d bytes: %v", n, n, err)
		}
	}
}
