package main

import (
	"context"
	"log/slog"

	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/source"
	"github.com/heraldhq/herald/store"
)

// sourceDialers registers one consumer per broker source type (one line
// per type, as newDestinations does for publishers).
func sourceDialers() *source.Dialers {
	d := &source.Dialers{}
	return d
}

// startSources runs this node's share of the broker sources until the
// returned stop is called: stop waits for every consumer to settle the
// batch it holds, so it must run before the ingester closes.
func startSources(c *config, s store.Store, ing *ingest.Ingester, nodeID string, obs source.Observer, logger *slog.Logger) (stop func()) {
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
