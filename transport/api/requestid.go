package api

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
)

// RequestIDs makes request ids: req_<8 random hex digits>_<a sequence in
// base 36>, fresh within the process and, by the random part, across its
// restarts.
type RequestIDs struct {
	prefix string
	seq    atomic.Uint64
}

// NewRequestIDs returns a generator with a random prefix of its own.
func NewRequestIDs() *RequestIDs {
	var p [4]byte
	_, _ = rand.Read(p[:])
	return &RequestIDs{prefix: "req_" + hex.EncodeToString(p[:])}
}

// Next returns a new request id, in one allocation.
func (r *RequestIDs) Next() string {
	var b [32]byte
	id := append(append(b[:0], r.prefix...), '_')
	return string(strconv.AppendUint(id, r.seq.Add(1), 36))
}
