// Package compress compresses snapshot states as they are written (a state
// goes from its encoder into zstd a chunk at a time, so a snapshot is never
// held whole, uncompressed, in memory) and decompresses them, for every
// store.
package compress

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/plaudit/plaudit/persist"
)

// Encoders keeps zstd stream encoders for reuse (each holds a window and
// block buffers worth keeping between snapshots). The zero value is ready
// to use, and it is safe for concurrent use.
type Encoders struct {
	pool sync.Pool // *zstd.Encoder
}

// Append appends the zstd frame of what st writes to dst. It returns the
// extended slice and the number of bytes st wrote; on an error the frame
// in dst is cut short.
func (e *Encoders) Append(dst []byte, st persist.State) ([]byte, int64, error) {
	enc, _ := e.pool.Get().(*zstd.Encoder)
	if enc == nil {
		var err error
		// One goroutine: the snapshot's own writes compress it, with no
		// workers to wait for or leak.
		enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return dst, 0, err
		}
	}
	out := &appender{b: dst}
	enc.Reset(out)
	n, err := st.WriteTo(enc)
	if err == nil {
		err = enc.Close()
	}
	enc.Reset(nil) // keep no reference to out in the pool
	e.pool.Put(enc)
	return out.b, n, err
}

type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// Decoder decompresses the frames Encoders makes. One serves every agent:
// it is safe for concurrent use.
type Decoder struct {
	dec *zstd.Decoder
}

// NewDecoder returns a Decoder that refuses a frame decompressing to more
// than maxState bytes: the cap bounds what a corrupt or hostile frame can
// make a store allocate. zstd caps the window a frame may ask for by the
// same figure, and Encoders' frames ask for 4 MiB: a cap below that refuses
// some frames of smaller states too.
func NewDecoder(maxState uint64) (*Decoder, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxState))
	if err != nil {
		return nil, err
	}
	return &Decoder{dec: dec}, nil
}

// Decode returns the state in frame, never nil. The frame does not say its
// state's size (Encoders streams it), so the buffer starts at zstd's own
// guess and grows as it decodes.
func (d *Decoder) Decode(frame []byte) ([]byte, error) {
	state, err := d.dec.DecodeAll(frame, nil)
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if state == nil {
		state = []byte{}
	}
	return state, nil
}

// Close releases the decoder's buffers; Decode must not be called after.
func (d *Decoder) Close() { d.dec.Close() }
