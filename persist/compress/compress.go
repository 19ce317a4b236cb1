// Package compress compresses snapshot states as they are written: a state
// goes from its encoder into zstd a chunk at a time, so a snapshot is never
// held whole, uncompressed, in memory.
package compress

import (
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
