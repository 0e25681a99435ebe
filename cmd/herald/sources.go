package main

import (
	"context"
	"log/slog"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/source"
	amqpsrc "github.com/heraldhq/herald/source/amqp"
	mqttsrc "github.com/heraldhq/herald/source/mqtt"
	natssrc "github.com/heraldhq/herald/source/nats"
	redissrc "github.com/heraldhq/herald/source/redis"
	"github.com/heraldhq/herald/store"
)

// sourceDialers registers one consumer per broker source type (one line
// per type, as newDestinations does for publishers).
func sourceDialers() *source.Dialers {
	d := &source.Dialers{}
	d.Register(herald.DestinationAMQP, amqpsrc.Dial)
	d.Register(herald.DestinationMQTT, mqttsrc.Dial)
	d.Register(herald.DestinationRedis, redissrc.Dial)
	d.Register(herald.DestinationNATS, natssrc.Dial)
	return d
}

// startSources runs this node's share of the broker sources until the
// returned stop is called: stop waits for every consumer to settle the
// batch it holds, so it must run before the ingester closes.
func startSources(c *config, s store.Store, ing *ingest.Ingester, nodeID string, obs source.Observer, logger *slog.Logger) (stop func()) {
	nodeID = sourceNodeID(c, nodeID)
	m := source.New(source.Config{
		Store:       s,
		Connections: destination.NewCache(s, 0),
		Dialers:     sourceDialers(),
		Publisher:   ing,
		Decode:      httpapi.DecodeEvent,
		Node:        nodeID,
		MaxBody:     int(c.MaxBodyBytes),
		Observer:    obs,
		Logger:      logger,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// localSourceNode is the source node name of a SQLite node started without
// --node-id.
const localSourceNode = "local"

// sourceNodeID is the name this node consumes under. Consumers name their
// broker sessions after it (an MQTT session per node, a Redis consumer per
// node), and a broker keeps a session's share of messages for it while it
// is away: a name that changes at every start (the default --node-id is
// random) would strand that share. On SQLite one process owns the data
// directory, so the name can be fixed; on PostgreSQL each node names
// itself with --node-id (README, "Sources").
func sourceNodeID(c *config, engineNode string) string {
	if c.NodeID == "" && c.DatabaseURL == "" {
		return localSourceNode
	}
	return engineNode
}
