package cluster

import (
	"hash/fnv"
	"slices"
	"strconv"
)

// DefaultPartitions is the number of partitions a new cluster is created
// with: enough to spread agents over a few dozen nodes, few enough that
// every node renews all of its leases in one round.
const DefaultPartitions = 64

// MaxPartitions bounds the partition count a cluster may be created with.
const MaxPartitions = 4096

// PartitionOf is the partition an agent belongs to among n: FNV-1a of its
// id, modulo n. It never changes for a cluster (n is fixed at creation), so
// every node computes the same owner for a request without asking.
func PartitionOf(agentID string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(agentID))
	return int(h.Sum32() % uint32(n))
}

// preference orders partitions 0..n-1 by node's rendezvous weight, highest
// first: each node prefers a different, stable subset, so a node that
// restarts tends to take back the partitions it held, and two nodes looking
// for free partitions seldom race for the same one.
func preference(node string, n int) []int {
	weight := make([]uint64, n)
	order := make([]int, n)
	for p := range n {
		h := fnv.New64a()
		_, _ = h.Write([]byte(node))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write(strconv.AppendInt(nil, int64(p), 10))
		weight[p], order[p] = h.Sum64(), p
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case weight[a] > weight[b]:
			return -1
		case weight[a] < weight[b]:
			return 1
		}
		return a - b
	})
	return order
}

// fairShare is how many partitions each of nodes live nodes should own:
// n divided among them, rounded up (so every partition has room).
func fairShare(n, nodes int) int {
	if nodes < 1 {
		nodes = 1
	}
	return (n + nodes - 1) / nodes
}
