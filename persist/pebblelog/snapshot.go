package pebblelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/compress/zstd"
)

const (
	snapshotFormat = 1
	snapshotHeader = 1 + seqLen + crcLen
)

// codec compresses snapshots. EncodeAll and DecodeAll are safe for
// concurrent use, so one encoder and one decoder serve every agent.
type codec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

func newCodec(maxState uint64) (*codec, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return nil, err
	}
	// The cap bounds what a corrupt or hostile frame can make us allocate.
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxState))
	if err != nil {
		enc.Close()
		return nil, err
	}
	return &codec{enc: enc, dec: dec}, nil
}

func (c *codec) close() {
	c.enc.Close()
	c.dec.Close()
}

// snapshotCRC covers the snapshot key (so the agent), the covered seq and the
// compressed state: v[1:] with the checksum field skipped.
func snapshotCRC(key, v []byte) uint32 {
	h := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, v[1:1+seqLen])
	return crc32.Update(h, castagnoli, v[snapshotHeader:])
}

func (c *codec) encode(key []byte, seq uint64, state []byte) []byte {
	v := make([]byte, snapshotHeader, snapshotHeader+len(state)/2+64)
	v[0] = snapshotFormat
	binary.BigEndian.PutUint64(v[1:], seq)
	v = c.enc.EncodeAll(state, v)
	binary.BigEndian.PutUint32(v[1+seqLen:], snapshotCRC(key, v))
	return v
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
	state, err = c.dec.DecodeAll(v[snapshotHeader:], nil)
	if err != nil {
		return nil, 0, fmt.Errorf("zstd: %v", err)
	}
	if state == nil {
		state = []byte{}
	}
	return state, seq, nil
}
