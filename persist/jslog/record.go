package jslog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/plaudit/plaudit/persist"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordFormat is the first byte of every batch record.
const recordFormat = 1

// errRecord is wrapped (with persist.ErrCorrupt) by decodeBatch.
var errRecord = errors.New("jslog: bad record")

// encodeBatch encodes b's First, events and index writes as one message
// body: the format byte, then uvarints and length-prefixed byte strings,
// then CRC32C of everything before it (4 bytes big-endian). The agent is the
// message's subject, not part of the body.
//
//	format(1) first count {len event}* nindex {len key, has(1), [len value]}* crc(4)
func encodeBatch(b persist.Batch) []byte {
	size := 1 + 3*binary.MaxVarintLen64 + 4
	for _, e := range b.Events {
		size += binary.MaxVarintLen64 + len(e)
	}
	for _, kv := range b.Index {
		size += 2*binary.MaxVarintLen64 + 1 + len(kv.Key) + len(kv.Value)
	}
	out := make([]byte, 0, size)
	out = append(out, recordFormat)
	out = binary.AppendUvarint(out, b.First)
	out = binary.AppendUvarint(out, uint64(len(b.Events)))
	for _, e := range b.Events {
		out = binary.AppendUvarint(out, uint64(len(e)))
		out = append(out, e...)
	}
	out = appendKVs(out, b.Index)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

// appendKVs appends a count, then each write as {len key, has(1), [len
// value]}: has is 0 for a deletion (a nil value), 2 for a unique key's
// write (Unique), 1 otherwise.
func appendKVs(out []byte, kvs []persist.KV) []byte {
	out = binary.AppendUvarint(out, uint64(len(kvs)))
	for _, kv := range kvs {
		out = appendBytes(out, kv.Key)
		switch {
		case kv.Value == nil:
			out = append(out, 0)
			continue
		case kv.Unique:
			out = append(out, 2)
		default:
			out = append(out, 1)
		}
		out = appendBytes(out, kv.Value)
	}
	return out
}

func appendBytes(out, b []byte) []byte {
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}

// decodeBatch decodes a record made by encodeBatch for agent. The slices it
// returns are copies.
func decodeBatch(agent string, data []byte) (persist.Batch, error) {
	bad := func(what string) (persist.Batch, error) {
		return persist.Batch{}, fmt.Errorf("%w: %w: %s", persist.ErrCorrupt, errRecord, what)
	}
	if len(data) < 5 {
		return bad("too short")
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return bad("checksum mismatch")
	}
	if body[0] != recordFormat {
		return bad(fmt.Sprintf("format %d", body[0]))
	}
	r := reader{buf: body[1:]}
	b := persist.Batch{Agent: agent, First: r.uvarint()}
	n := r.count()
	for range n {
		b.Events = append(b.Events, r.bytes())
	}
	b.Index = r.kvs()
	switch {
	case r.err != "":
		return bad(r.err)
	case len(r.buf) != 0:
		return bad("trailing bytes")
	case b.First == 0:
		return bad("sequence 0")
	case len(b.Events) == 0:
		return bad("no events")
	}
	return b, nil
}

// reader reads a record's fields; the first failure sticks in err, and
// every read after it returns zero values.
type reader struct {
	buf []byte
	err string
}

func (r *reader) uvarint() uint64 {
	if r.err != "" {
		return 0
	}
	// n is 0 for a truncated varint and negative for an overflowing one:
	// never a shortest encoding's length.
	v, n := binary.Uvarint(r.buf)
	if n != uvarintLen(v) {
		r.err = "bad varint"
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// count reads a count of elements, each of which takes a byte at least: a
// count beyond the bytes left is corrupt, so a damaged one cannot make the
// decoder allocate beyond the record's size.
func (r *reader) count() uint64 {
	n := r.uvarint()
	if n > uint64(len(r.buf)) {
		if r.err == "" {
			r.err = "count beyond the record"
		}
		return 0
	}
	return n
}

// kvs reads what appendKVs wrote.
func (r *reader) kvs() []persist.KV {
	var kvs []persist.KV
	n := r.count()
	for range n {
		kv := persist.KV{Key: r.bytes()}
		switch r.byte() {
		case 0:
		case 1:
			kv.Value = r.bytes()
		case 2:
			kv.Value, kv.Unique = r.bytes(), true
		default:
			r.err = "value flag"
		}
		kvs = append(kvs, kv)
	}
	return kvs
}

func (r *reader) byte() byte {
	if r.err != "" {
		return 0
	}
	if len(r.buf) == 0 {
		r.err = "truncated"
		return 0
	}
	c := r.buf[0]
	r.buf = r.buf[1:]
	return c
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != "" {
		return nil
	}
	if n > uint64(len(r.buf)) {
		r.err = "length beyond the record"
		return nil
	}
	out := make([]byte, n)
	copy(out, r.buf[:n])
	r.buf = r.buf[n:]
	return out
}

// uvarintLen is the length of v's shortest encoding, the only one a record
// may hold (so each batch has exactly one record).
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}
