package api

import (
	"fmt"
	"time"

	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// ClusterStatus is a cluster node's view of its cluster.
type ClusterStatus struct {
	Name, Node string
	Partitions int
	LeaseTTL   time.Duration
	Members    []ClusterMember // the live nodes, by id
	Owners     []string        // each partition's owner, "" for none
	// DirectoryLag is how many directory writes this node has not applied
	// yet; nil when the directory's stream did not answer in time.
	DirectoryLag *uint64
	Logs         []ClusterLog // each partition's log, by partition
	// Directory and Leases are the streams of the directory and of the
	// lease bucket: while the node that leads one is lost, its writes wait
	// for JetStream to elect another (docs/cluster.md).
	Directory, Leases ClusterLog
}

// ClusterLog is one stream's state, a partition's log or another: its size
// and its copies. Leader is "" while no copy takes writes (or its state
// could not be read).
type ClusterLog struct {
	Messages, Bytes uint64
	Leader          string
	Replicas        []ClusterReplica
}

// ClusterReplica is a follower copy of a partition's log.
type ClusterReplica struct {
	Server  string
	Current bool
	Lag     uint64
}

// ClusterMember is a live node.
type ClusterMember struct {
	Node  string
	Since time.Time
}

// getCluster answers GET /v1/cluster: admins only; 404 on a single node.
func (c *call) getCluster() (result, error) {
	if !c.p.Admin {
		return result{}, fmt.Errorf("the cluster's state: %w", tenancy.ErrForbidden)
	}
	if c.s.cfg.Cluster == nil {
		return result{}, notFound("cluster", "(this server runs alone)")
	}
	st, err := c.s.cfg.Cluster()
	if err != nil {
		return result{}, err
	}
	return ok(appendCluster(nil, st))
}

func appendCluster(b []byte, st ClusterStatus) []byte {
	held := map[string]int{}
	for _, o := range st.Owners {
		held[o]++
	}
	b = append(b, '{')
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, st.Name)
	b = jsonw.Key(b, "node")
	b = jsonw.String(b, st.Node)
	b = jsonw.Key(b, "partitions")
	b = jsonw.Int(b, int64(st.Partitions))
	b = jsonw.Key(b, "lease_ttl_ms")
	b = jsonw.Int(b, st.LeaseTTL.Milliseconds())
	b = jsonw.Key(b, "directory_lag")
	if st.DirectoryLag == nil {
		b = append(b, "null"...)
	} else {
		b = jsonw.Int(b, int64(*st.DirectoryLag))
	}
	b = jsonw.Key(b, "nodes")
	b = append(b, '[')
	for i, m := range st.Members {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = jsonw.Key(b, "node")
		b = jsonw.String(b, m.Node)
		b = jsonw.Key(b, "since")
		b = jsonw.Time(b, m.Since)
		b = jsonw.Key(b, "partitions")
		b = jsonw.Int(b, int64(held[m.Node]))
		b = append(b, '}')
	}
	b = append(b, ']')
	b = jsonw.Key(b, "owners")
	b = append(b, '[')
	for p, o := range st.Owners {
		if p > 0 {
			b = append(b, ',')
		}
		b = jsonw.StringOrNull(b, o)
	}
	b = append(b, ']')
	b = jsonw.Key(b, "logs")
	b = append(b, '[')
	for p, l := range st.Logs {
		if p > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = jsonw.Key(b, "partition")
		b = jsonw.Int(b, int64(p))
		b = appendStreamState(b, l)
	}
	b = append(b, ']')
	b = jsonw.Key(b, "directory")
	b = appendStreamState(append(b, '{'), st.Directory)
	b = jsonw.Key(b, "leases")
	b = appendStreamState(append(b, '{'), st.Leases)
	return append(b, '}')
}

// appendStreamState appends a stream's members, then closes its object.
func appendStreamState(b []byte, l ClusterLog) []byte {
	b = jsonw.Key(b, "messages")
	b = jsonw.Int(b, int64(l.Messages))
	b = jsonw.Key(b, "bytes")
	b = jsonw.Int(b, int64(l.Bytes))
	b = jsonw.Key(b, "leader")
	b = jsonw.StringOrNull(b, l.Leader)
	b = jsonw.Key(b, "replicas")
	b = append(b, '[')
	for i, r := range l.Replicas {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = jsonw.Key(b, "server")
		b = jsonw.String(b, r.Server)
		b = jsonw.Key(b, "current")
		b = jsonw.Bool(b, r.Current)
		b = jsonw.Key(b, "lag")
		b = jsonw.Int(b, int64(r.Lag))
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
