// Package cluster runs Plaudit nodes as one cluster on NATS JetStream.
//
// Agents hash into a fixed number of partitions (PartitionOf), chosen when
// the cluster is created. Each partition has one owner at a time, held as a
// lease in a JetStream key-value bucket (LeaseBucket): created by revision,
// renewed by revision every LeaseConfig.Renew, and expired by the bucket's
// TTL when its owner stops renewing. Every node watches the bucket, keeps a
// fair share of the partitions among the live nodes (those whose heartbeat
// has not expired), takes free ones in its rendezvous order and hands
// partitions over when another node holds fewer than its share.
//
// A lease alone cannot stop an owner that was paused between checking its
// lease and writing; the epoch a partition was taken at (the lease's
// revision, which only grows) fences the partition's log against such late
// writes.
package cluster
