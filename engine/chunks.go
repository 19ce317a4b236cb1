package engine

// chunked is an append-only sequence kept in blocks of chunkLen items. An
// append copies at most the first block, while it grows, never the history:
// a slice holding an agent's history regrew by a quarter at a time, and
// each regrowth copied (and faulted in) all of it in the actor's turn. With
// 300,000 feedback records that was a 22 MB allocation and 10 ms in which
// the agent answered nothing (BENCHMARKS.md). The first block grows as a
// slice does, so a small agent holds no more than it uses.
//
// A view (see view) shares the blocks, so it is taken only of a sequence
// whose items are never overwritten in place.
type chunked[T any] struct {
	blocks [][]T // all full but the last, which is not empty
}

// chunkLen is a block's length: a power of two, so At is a shift and a
// mask, and small enough that copying the first block as it grows is
// nothing beside the append it serves.
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
		var b []T
		if k > 0 {
			b = make([]T, 0, chunkLen) // every block after the first is full size
		}
		c.blocks = append(c.blocks, b)
		k++
	}
	b := c.blocks[k-1]
	if len(b) == cap(b) {
		grown := make([]T, len(b), min(max(2*cap(b), 4), chunkLen))
		copy(grown, b)
		b = grown
	}
	c.blocks[k-1] = append(b, v)
}

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
	v := chunked[T]{blocks: make([][]T, len(c.blocks))}
	copy(v.blocks, c.blocks)
	if k := len(v.blocks); k > 0 {
		v.blocks[k-1] = capped(v.blocks[k-1])
	}
	return v
}
