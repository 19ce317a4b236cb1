package engine

import "testing"

func filled(n int) *chunked[int] {
	var c chunked[int]
	for i := range n {
		c.Append(i)
	}
	return &c
}

func TestChunkedKeepsOrderAcrossBlocks(t *testing.T) {
	for _, n := range []int{0, 1, 5, chunkLen - 1, chunkLen, chunkLen + 1, 3*chunkLen + 7} {
		c := filled(n)
		if c.Len() != n {
			t.Fatalf("n=%d: Len %d", n, c.Len())
		}
		for i := range n {
			if got := *c.At(i); got != i {
				t.Fatalf("n=%d: At(%d) = %d", n, i, got)
			}
		}
		var values []int
		for i, v := range c.Values {
			if v != i {
				t.Fatalf("n=%d: Values gave %d at %d", n, v, i)
			}
			values = append(values, v)
		}
		if len(values) != n {
			t.Fatalf("n=%d: Values yielded %d", n, len(values))
		}
		for k, b := range c.blocks {
			if cap(b) > chunkLen || k < len(c.blocks)-1 && len(b) != chunkLen {
				t.Fatalf("n=%d: block %d has len %d cap %d", n, k, len(b), cap(b))
			}
		}
	}
}

func TestChunkedSmallStaysSmall(t *testing.T) {
	for _, tc := range []struct{ n, most int }{
		{1, 4},                       // the first block starts at 4
		{chunkLen + 1, chunkLen / 8}, // the others at an eighth
		{2*chunkLen + chunkLen/8 + 1, chunkLen / 4}, // and double
	} {
		c := filled(tc.n)
		if got := cap(c.blocks[len(c.blocks)-1]); got > tc.most {
			t.Errorf("%d items: the last block holds %d, want at most %d", tc.n, got, tc.most)
		}
	}
}

func TestChunkedFullBlocksNeverMove(t *testing.T) {
	c := filled(chunkLen)
	first := c.At(0)
	for i := range 5 * chunkLen {
		c.Append(chunkLen + i)
	}
	if c.At(0) != first {
		t.Fatal("an append moved an item of a full block")
	}
}

func TestChunkedViewDoesNotSeeLaterAppends(t *testing.T) {
	for _, n := range []int{0, 3, chunkLen, chunkLen + 3} {
		c := filled(n)
		v := c.view()
		for i := range 2*chunkLen + 1 {
			c.Append(-i)
		}
		var got []int
		for _, x := range v.Values {
			got = append(got, x)
		}
		if len(got) != n || v.Len() != n {
			t.Fatalf("n=%d: the view holds %d items after appends", n, len(got))
		}
		for i, x := range got {
			if x != i {
				t.Fatalf("n=%d: view item %d = %d", n, i, x)
			}
		}
		v.Append(99) // an append to a view leaves the original alone
		if n < c.Len() && *c.At(n) != 0 {
			t.Fatalf("n=%d: appending to the view overwrote item %d of the original: %d", n, n, *c.At(n))
		}
	}
}

func TestChunkedAtOutOfRangePanics(t *testing.T) {
	c := filled(chunkLen)
	for _, i := range []int{-1, chunkLen, chunkLen + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("At(%d) of %d did not panic", i, chunkLen)
				}
			}()
			c.At(i)
		}()
	}
}
