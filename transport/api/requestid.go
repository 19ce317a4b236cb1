package api

import (
	"crypto/rand"
	"encoding/hex"
	"hash/maphash"
	"sync/atomic"
)

// RequestIDs makes request ids: req_<8 random hex digits>_<16 hex digits>,
// fresh within the process and, by the random part, across its restarts.
// The 16 digits are a sequence number under a permutation keyed at start,
// so that a tenant cannot count the requests of others between two of its
// own.
type RequestIDs struct {
	prefix string
	seq    atomic.Uint64
	rounds [4]maphash.Seed
}

// NewRequestIDs returns a generator with a random prefix and key of its own.
func NewRequestIDs() *RequestIDs {
	var p [4]byte
	_, _ = rand.Read(p[:])
	return newRequestIDs("req_" + hex.EncodeToString(p[:]))
}

func newRequestIDs(prefix string) *RequestIDs {
	r := &RequestIDs{prefix: prefix}
	for i := range r.rounds {
		r.rounds[i] = maphash.MakeSeed()
	}
	return r
}

// Next returns a new request id, in one allocation.
func (r *RequestIDs) Next() string {
	var b [32]byte
	id := append(append(b[:0], r.prefix...), '_')
	n := r.permute(r.seq.Add(1))
	for shift := 60; shift >= 0; shift -= 4 {
		id = append(id, hexDigits[n>>shift&0xf])
	}
	return string(id)
}

const hexDigits = "0123456789abcdef"

// permute is a Feistel network of four rounds keyed by r.rounds: a
// permutation of the uint64s, so distinct sequence numbers give distinct
// ids, in an order that does not tell how far apart they are.
func (r *RequestIDs) permute(n uint64) uint64 {
	left, right := uint32(n>>32), uint32(n)
	for _, k := range r.rounds {
		left, right = right, left^uint32(maphash.Comparable(k, right))
	}
	return uint64(left)<<32 | uint64(right)
}
