package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MetaBucket holds the cluster's metadata under MetaKey, written once by
// the first node to start and read by every node after.
const (
	MetaBucket = "plaudit_cluster"
	MetaKey    = "meta"
)

// Meta is what every node of a cluster must agree on.
type Meta struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	// LeaseTTLMillis is the lease TTL, in milliseconds (the bucket's is
	// a multiple of it: LeaseBucketConfig).
	LeaseTTLMillis int64     `json:"lease_ttl_ms"`
	CreatedAt      time.Time `json:"created_at"`
}

// LeaseTTL is the cluster's lease TTL.
func (m Meta) LeaseTTL() time.Duration { return time.Duration(m.LeaseTTLMillis) * time.Millisecond }

// ErrWrongCluster is returned by Join when the stored metadata disagrees
// with what the node was started with.
var ErrWrongCluster = errors.New("cluster: metadata disagrees")

// Join returns the cluster's metadata, creating it from want when this
// node is the first (want.Partitions 0 takes DefaultPartitions, a zero
// lease TTL DefaultLeaseTTL). A node joining an existing cluster takes its
// partition count and lease TTL; one started with another name, or with a
// partition count or lease TTL set and different from the cluster's, is
// refused with ErrWrongCluster (the partition count cannot change once
// agents are placed by it). replicas is the metadata bucket's replication.
// created tells whether this call created the cluster.
func Join(ctx context.Context, js jetstream.JetStream, want Meta, replicas int) (m Meta, created bool, err error) {
	if want.Name == "" || !ValidNode(want.Name) {
		return Meta{}, false, fmt.Errorf("%w: cluster name %q (1-64 letters, digits, '-', '_')", ErrBadConfig, want.Name)
	}
	if want.Partitions < 0 || want.Partitions > MaxPartitions {
		return Meta{}, false, fmt.Errorf("%w: %d partitions (1-%d)", ErrBadConfig, want.Partitions, MaxPartitions)
	}
	kv, err := js.KeyValue(ctx, MetaBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: MetaBucket, History: 1,
			Storage: jetstream.FileStorage, Replicas: replicas})
	}
	if err != nil {
		return Meta{}, false, fmt.Errorf("cluster: metadata bucket: %w", err)
	}
	create := want
	if create.Partitions == 0 {
		create.Partitions = DefaultPartitions
	}
	if create.LeaseTTLMillis == 0 {
		create.LeaseTTLMillis = DefaultLeaseTTL.Milliseconds()
	}
	if create.CreatedAt.IsZero() {
		create.CreatedAt = time.Now().UTC()
	}
	b, err := json.Marshal(create)
	if err != nil {
		return Meta{}, false, err
	}
	if _, err := kv.Create(ctx, MetaKey, b); err == nil {
		return create, true, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return Meta{}, false, fmt.Errorf("cluster: creating metadata: %w", err)
	}
	e, err := kv.Get(ctx, MetaKey)
	if err != nil {
		return Meta{}, false, fmt.Errorf("cluster: reading metadata: %w", err)
	}
	var got Meta
	if err := json.Unmarshal(e.Value(), &got); err != nil {
		return Meta{}, false, fmt.Errorf("cluster: reading metadata: %w", err)
	}
	switch {
	case got.Name != want.Name:
		return Meta{}, false, fmt.Errorf("%w: this NATS holds cluster %q, not %q", ErrWrongCluster, got.Name, want.Name)
	case want.Partitions != 0 && want.Partitions != got.Partitions:
		return Meta{}, false, fmt.Errorf("%w: cluster %q has %d partitions, not %d", ErrWrongCluster, got.Name, got.Partitions, want.Partitions)
	case want.LeaseTTLMillis != 0 && want.LeaseTTLMillis != got.LeaseTTLMillis:
		return Meta{}, false, fmt.Errorf("%w: cluster %q has a %v lease TTL, not %v", ErrWrongCluster, got.Name, got.LeaseTTL(), want.LeaseTTL())
	}
	return got, false, nil
}
