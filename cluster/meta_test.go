package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestJoinCreatesTheMetadataOnceAndLaterNodesTakeIt(t *testing.T) {
	js, err := jetstream.New(startJetStream(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, created, err := Join(ctx, js, Meta{Name: "prod", Partitions: 16}, 1)
	if err != nil || !created {
		t.Fatalf("first Join: created %v, %v", created, err)
	}
	if first.Partitions != 16 || first.LeaseTTL() != DefaultLeaseTTL || first.CreatedAt.IsZero() {
		t.Errorf("created %+v, want 16 partitions, the default lease TTL and a creation time", first)
	}
	for _, tc := range []struct {
		name string
		want Meta
		err  error
	}{
		{"defaults take the cluster's", Meta{Name: "prod"}, nil},
		{"the same settings", Meta{Name: "prod", Partitions: 16, LeaseTTLMillis: DefaultLeaseTTL.Milliseconds()}, nil},
		{"another partition count", Meta{Name: "prod", Partitions: 64}, ErrWrongCluster},
		{"another lease TTL", Meta{Name: "prod", LeaseTTLMillis: 1000}, ErrWrongCluster},
		{"another cluster's name", Meta{Name: "staging"}, ErrWrongCluster},
		{"a name that cannot be a key", Meta{Name: "a.b"}, ErrBadConfig},
		{"no name", Meta{}, ErrBadConfig},
		{"too many partitions", Meta{Name: "prod", Partitions: MaxPartitions + 1}, ErrBadConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, created, err := Join(ctx, js, tc.want, 1)
			if !errors.Is(err, tc.err) || created {
				t.Fatalf("Join: created %v, %v; want %v", created, err, tc.err)
			}
			if err == nil && (got.Partitions != 16 || !got.CreatedAt.Equal(first.CreatedAt)) {
				t.Errorf("Join = %+v, want the stored %+v", got, first)
			}
		})
	}
}

func TestJoinFillsDefaultsForANewCluster(t *testing.T) {
	js, err := jetstream.New(startJetStream(t))
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := Join(context.Background(), js, Meta{Name: "c1"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Partitions != DefaultPartitions || m.LeaseTTL() != 6*time.Second {
		t.Errorf("new cluster %+v, want %d partitions and a 6s lease", m, DefaultPartitions)
	}
}
