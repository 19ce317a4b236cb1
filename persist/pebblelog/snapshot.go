package pebblelog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/compress"
)

const (
	snapshotFormat = 1
	snapshotHeader = 1 + seqLen + crcLen
)

// codec compresses snapshots. States are compressed as they are written,
// by encoders kept for reuse; one decoder serves every agent.
type codec struct {
	enc compress.Encoders
	dec *compress.Decoder
}

func newCodec(maxState uint64) (*codec, error) {
	dec, err := compress.NewDecoder(maxState)
	if err != nil {
		return nil, err
	}
	return &codec{dec: dec}, nil
}

func (c *codec) close() { c.dec.Close() }

// snapshotCRC covers the snapshot key (so the agent), the covered seq and the
// compressed state: v[1:] with the checksum field skipped.
func snapshotCRC(key, v []byte) uint32 {
	h := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, v[1:1+seqLen])
	return crc32.Update(h, castagnoli, v[snapshotHeader:])
}

// encode compresses what state writes into a stored snapshot.
func (c *codec) encode(key []byte, seq uint64, state persist.State) ([]byte, error) {
	v := make([]byte, snapshotHeader, snapshotHeader+4<<10)
	v[0] = snapshotFormat
	binary.BigEndian.PutUint64(v[1:], seq)
	v, _, err := c.enc.Append(v, state)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(v[1+seqLen:], snapshotCRC(key, v))
	return v, nil
}

var errSnapshotFormat = errors.New("unknown format")

// snapshotSeq reads the covered seq from a stored snapshot without checking it.
func snapshotSeq(v []byte) (uint64, bool) {
	if len(v) < snapshotHeader || v[0] != snapshotFormat {
		return 0, false
	}
	return binary.BigEndian.Uint64(v[1:]), true
}

// decode verifies and decompresses a stored snapshot. The returned state is
// never nil.
func (c *codec) decode(key, v []byte) (state []byte, seq uint64, err error) {
	seq, ok := snapshotSeq(v)
	if !ok {
		return nil, 0, errSnapshotFormat
	}
	if binary.BigEndian.Uint32(v[1+seqLen:]) != snapshotCRC(key, v) {
		return nil, 0, errors.New("checksum mismatch")
	}
	if state, err = c.dec.Decode(v[snapshotHeader:]); err != nil {
		return nil, 0, err
	}
	return state, seq, nil
}
