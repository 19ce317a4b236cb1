package engine

import (
	"slices"

	"github.com/plaudit/plaudit/engine/objective"
)

// chunked is an append-only sequence kept in blocks of chunkLen items. An
// append copies at most the block it lands in, while that grows, never the
// history: a slice holding an agent's history regrew by a quarter at a
// time, and each regrowth copied (and faulted in) all of it in the actor's
// turn. With 300,000 feedback records that was a 22 MB allocation and 10 ms
// in which the agent answered nothing (BENCHMARKS.md). Each block grows as
// a slice does, so an agent holds little it does not use.
//
// A view (see view) shares the blocks, so it is taken only of a sequence
// whose items are never overwritten in place.
type chunked[T any] struct {
	blocks [][]T // all full but the last, which is not empty
}

// chunkLen is a block's length: a power of two, so At is a shift and a
// mask, and small enough that copying a block as it grows is nothing beside
// the appends it serves.
const chunkLen = 1 << 10

// Len is the number of items.
func (c *chunked[T]) Len() int {
	k := len(c.blocks)
	if k == 0 {
		return 0
	}
	return (k-1)*chunkLen + len(c.blocks[k-1])
}

// At returns item i; the pointer is valid until the next Append.
func (c *chunked[T]) At(i int) *T {
	if uint(i) >= uint(c.Len()) {
		panic("engine: chunked index out of range")
	}
	return &c.blocks[i/chunkLen][i%chunkLen]
}

// Append adds v at the end.
func (c *chunked[T]) Append(v T) {
	k := len(c.blocks)
	if k == 0 || len(c.blocks[k-1]) == chunkLen {
		c.blocks = append(c.blocks, nil)
		k++
	}
	b := c.blocks[k-1]
	if len(b) == cap(b) {
		// A block grows as a slice does, from 4 items for the first and
		// from an eighth of chunkLen for the others: an agent's last block
		// holds little it does not use.
		first := 4
		if k > 1 {
			first = chunkLen / 8
		}
		grown := make([]T, len(b), min(max(2*cap(b), first), chunkLen))
		copy(grown, b)
		b = grown
	}
	c.blocks[k-1] = append(b, v)
}

// names is an append-only table of distinct strings, each named by its
// index; 0 names "". It is how the logs keep a string their records repeat
// once per agent.
type names struct {
	list  chunked[string]
	index map[string]uint32 // made at the first intern; a view has none
}

// intern returns the name of s, adding it if it is new.
func (t *names) intern(s string) uint32 {
	if t.index == nil {
		t.list.Append("")
		t.index = map[string]uint32{"": 0}
	}
	if n, ok := t.index[s]; ok {
		return n
	}
	n := uint32(t.list.Len())
	t.list.Append(s)
	t.index[s] = n
	return n
}

// reindex makes the index of a view's list, which intern would have made.
func (t *names) reindex() {
	if t.list.Len() == 0 {
		return
	}
	t.index = make(map[string]uint32, t.list.Len())
	for n, s := range t.list.Values {
		t.index[s] = uint32(n)
	}
}

// internBytes is intern of string(b), which it makes only for a new name.
func (t *names) internBytes(b []byte) uint32 {
	if n, ok := t.index[string(b)]; ok {
		return n
	}
	return t.intern(string(b))
}

// kindCodes numbers a table's names as a Kinds numbers its kinds: a name
// it does not list is NoKind. It is a list, not a map: a definition names
// a few kinds.
type kindCodes []kindCode

type kindCode struct {
	name uint32
	code int32
}

// codes appends to dst the numbers k gives the names t holds.
func (t *names) codes(dst kindCodes, k *objective.Kinds) kindCodes {
	dst = dst[:0]
	for i, kind := range k.Names() {
		if n, ok := t.find(kind); ok {
			dst = append(dst, kindCode{n, int32(i)})
		}
	}
	return dst
}

// of returns the number of name n.
func (c kindCodes) of(n uint32) int32 {
	for _, x := range c {
		if x.name == n {
			return x.code
		}
	}
	return objective.NoKind
}

// find returns the name of s, if s was interned.
func (t *names) find(s string) (uint32, bool) {
	n, ok := t.index[s]
	return n, ok
}

// at returns the string named n.
func (t *names) at(n uint32) string { return *t.list.At(int(n)) }

// view is an immutable copy without the index, as chunked's view.
func (t *names) view() names { return names{list: t.list.view()} }

// Values yields every item with its index, in order, by value.
func (c *chunked[T]) Values(yield func(int, T) bool) {
	i := 0
	for _, b := range c.blocks {
		for _, v := range b {
			if !yield(i, v) {
				return
			}
			i++
		}
	}
}

// view is a copy that later appends do not show: it shares the blocks,
// the last capped at its length, so an item appended after it lands beyond
// what it reads (and an append to the view itself copies that block).
func (c *chunked[T]) view() chunked[T] {
	if len(c.blocks) == 0 {
		return chunked[T]{}
	}
	v := chunked[T]{blocks: make([][]T, len(c.blocks))}
	copy(v.blocks, c.blocks)
	if k := len(v.blocks); k > 0 {
		v.blocks[k-1] = capped(v.blocks[k-1])
	}
	return v
}

// cowChunked is a chunked whose items also change in place (mut). A view
// shares the blocks as chunked's does, and mut copies a block that a view
// holds before it changes one of its items, so a view never shows a change
// made after it; the first change after a view copies one block (at most
// chunkLen items), not the history.
type cowChunked[T any] struct {
	chunked[T]
	shared []bool // per block: a view holds it
}

// mut returns item i to change in place; the pointer is valid until the
// next Append, mut or view.
func (c *cowChunked[T]) mut(i int) *T {
	if b := i / chunkLen; b < len(c.shared) && c.shared[b] {
		c.blocks[b] = append(make([]T, 0, cap(c.blocks[b])), c.blocks[b]...)
		c.shared[b] = false
	}
	return c.At(i)
}

// view is chunked's view; every block it shares is copied before its next
// change.
func (c *cowChunked[T]) view() cowChunked[T] {
	c.shared = allShared(c.shared, len(c.blocks))
	return cowChunked[T]{chunked: c.chunked.view()}
}

// allShared marks all n blocks as held by a view, reusing shared.
func allShared(shared []bool, n int) []bool {
	shared = slices.Grow(shared[:0], n)[:n]
	for b := range shared {
		shared[b] = true
	}
	return shared
}

// cowSparse holds what few items of a numbered sequence have, by number,
// in blocks of sparseBlockLen made when one of their items first needs
// one; an item without one reads as nil (at) or as the zero T (mut). Like
// cowChunked, a view shares the blocks and mut copies a block a view holds
// before it changes it. Keyed by number rather than kept in the order
// items first needed one, it is laid out alike however the sequence was
// rebuilt (live, from the log, from a snapshot).
type cowSparse[T any] struct {
	blocks [][]T  // nil, or sparseBlockLen long
	shared []bool // per block: a view holds it
}

// sparseBlockLen is small, so a block made for one item costs a few
// kilobytes however rare such items are.
const sparseBlockLen = 64

// at returns item i, nil if its block has none.
func (c *cowSparse[T]) at(i int) *T {
	if b := i / sparseBlockLen; b < len(c.blocks) && c.blocks[b] != nil {
		return &c.blocks[b][i%sparseBlockLen]
	}
	return nil
}

// mut returns item i to change in place, making its block or copying it
// first if a view holds it; valid until the next mut or view.
func (c *cowSparse[T]) mut(i int) *T {
	b := i / sparseBlockLen
	if b >= len(c.blocks) {
		c.blocks = slices.Grow(c.blocks, b+1-len(c.blocks))[:b+1]
	}
	switch shared := b < len(c.shared) && c.shared[b]; {
	case c.blocks[b] == nil:
		c.blocks[b] = make([]T, sparseBlockLen)
	case shared:
		c.blocks[b] = slices.Clone(c.blocks[b])
	}
	if b < len(c.shared) {
		c.shared[b] = false // the block is this sequence's own now
	}
	return &c.blocks[b][i%sparseBlockLen]
}

// view is an immutable copy: every block it shares is copied before its
// next change.
func (c *cowSparse[T]) view() cowSparse[T] {
	c.shared = allShared(c.shared, len(c.blocks))
	return cowSparse[T]{blocks: capped(slices.Clone(c.blocks))}
}

// unsetSparse drops item i's block once every item in it is zero, so that
// a sequence whose items lost what they had is laid out as one whose items
// never had any.
func unsetSparse[T comparable](c *cowSparse[T], i int) {
	b := i / sparseBlockLen
	var zero T
	for _, v := range c.blocks[b] {
		if v != zero {
			return
		}
	}
	c.blocks[b] = nil
	for len(c.blocks) > 0 && c.blocks[len(c.blocks)-1] == nil {
		c.blocks = c.blocks[:len(c.blocks)-1]
	}
	if len(c.blocks) == 0 {
		c.blocks = nil
	}
}
