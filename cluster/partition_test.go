package cluster

import (
	"fmt"
	"slices"
	"testing"
)

func TestPartitionOfIsStableAndSpreadsAgents(t *testing.T) {
	// Fixed values: every node, of every version, must agree on them.
	for _, tc := range []struct {
		agent string
		n     int
		want  int
	}{
		{"agt_01JDZ8V1Q9M3K7X2W5T4R6N8P0", 64, 26},
		{"", 64, 5},   // FNV-1a offset basis 2166136261 % 64
		{"a", 64, 44}, // 0xe40c292c % 64
		{"a", 1, 0},
	} {
		if got := PartitionOf(tc.agent, tc.n); got != tc.want {
			t.Errorf("PartitionOf(%q, %d) = %d, want %d", tc.agent, tc.n, got, tc.want)
		}
	}
	counts := make([]int, 64)
	for i := range 64_000 {
		counts[PartitionOf(fmt.Sprintf("agt_%026d", i), 64)]++
	}
	for p, c := range counts {
		if c < 800 || c > 1200 { // 1000 expected; a bad hash piles agents up
			t.Errorf("partition %d got %d of 64,000 agents", p, c)
		}
	}
}

func TestPreferenceIsAPermutationThatDiffersByNode(t *testing.T) {
	a, b := preference("a", 64), preference("b", 64)
	for _, order := range [][]int{a, b} {
		sorted := slices.Sorted(slices.Values(order))
		for i, p := range sorted {
			if p != i {
				t.Fatalf("preference is not a permutation of 0..63: %v", order)
			}
		}
	}
	if slices.Equal(a, b) {
		t.Error("two nodes prefer the same order")
	}
	if !slices.Equal(a, preference("a", 64)) {
		t.Error("a node's order changed between calls")
	}
}

func TestFairShare(t *testing.T) {
	for _, tc := range []struct{ n, nodes, want int }{
		{64, 1, 64}, {64, 2, 32}, {64, 3, 22}, {64, 0, 64}, {4, 8, 1},
	} {
		if got := fairShare(tc.n, tc.nodes); got != tc.want {
			t.Errorf("fairShare(%d, %d) = %d, want %d", tc.n, tc.nodes, got, tc.want)
		}
	}
}
