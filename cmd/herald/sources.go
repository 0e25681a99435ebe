package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/eventtype"
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

// newSources builds this node's source manager; runSources runs it.
func newSources(c *config, s store.Store, ing *ingest.Ingester, catalog *eventtype.Catalog, nodeID string, obs source.Observer, logger *slog.Logger) *source.Manager {
	return source.New(source.Config{
		Store:       s,
		Connections: destination.NewCache(s, 0),
		Dialers:     sourceDialers(),
		Publisher:   ing,
		Decode:      catalogDecode(catalog, logger),
		Node:        sourceNodeID(c, nodeID),
		MaxBody:     int(c.MaxBodyBytes),
		Observer:    obs,
		Logger:      logger,
	})
}

// catalogReadTimeout bounds the catalog refresh a source's decode may
// wait for (it reads the store at most once per eventtype.DefaultPoll).
const catalogReadTimeout = 5 * time.Second

// catalogDecode decodes a source's event by the API's rules and checks
// its data against the event type catalog as POST /v1/events does, so a
// mismatch is a schema_mismatch reject. When the catalog cannot be read
// at all (the store is down before it ever loaded) the event goes on
// unchecked rather than being rejected for good: its commit then fails
// the same way and nothing is acknowledged, so the broker redelivers it.
func catalogDecode(catalog *eventtype.Catalog, logger *slog.Logger) source.DecodeFunc {
	return func(body []byte) (*herald.Event, error) {
		ev, err := httpapi.DecodeEvent(body)
		if err != nil {
			return nil, err
		}
		if err := catalog.ValidateWithin(catalogReadTimeout, ev, "data"); err != nil {
			if herald.ErrorCode(err) == herald.CodeSchemaMismatch {
				return nil, err
			}
			logger.Warn("sources: the event type catalog could not be read; event not schema-checked", "error", err)
		}
		return ev, nil
	}
}

// runSources runs m until the returned stop is called: stop waits for
// every consumer to settle the batch it holds, so it must run before the
// ingester closes.
func runSources(m *source.Manager) (stop func()) {
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
