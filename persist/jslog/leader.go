package jslog

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// ReadFromLeader turns direct gets off on stream, so that its reads go to
// its leader. KV buckets and object stores are made with direct gets,
// which every server holding a copy answers, and a paused server holds on
// to its share of them: a read that reaches it waits out its timeout.
// Every node does it, and binds its bucket again afterwards, since a
// bucket bound before the change reads directly.
func ReadFromLeader(ctx context.Context, js jetstream.JetStream, stream string) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	cfg := s.CachedInfo().Config
	if !cfg.AllowDirect {
		return nil
	}
	cfg.AllowDirect = false
	_, err = js.UpdateStream(ctx, cfg)
	return err
}
