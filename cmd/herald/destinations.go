package main

import (
	"log/slog"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	mqttdest "github.com/heraldhq/herald/destination/mqtt"
	redisdest "github.com/heraldhq/herald/destination/redis"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// newDestinations builds the Router the engine sends every attempt
// through: webhooks by sender, each other destination type by its own
// package. One Register line per type.
func newDestinations(c *config, s store.Store, sender *webhook.Sender, logger *slog.Logger) *destination.Router {
	_, _, _ = c, s, logger // used by the types registered below
	// TODO(issue 22): the store-backed connections (admin API) replace
	// this empty set.
	var conns destination.Connections = destination.NewStatic()
	r := destination.NewRouter(sender)
	r.Register(herald.DestinationRedis, redisdest.New(redisdest.Config{Connections: conns, Logger: logger}))
	r.Register(herald.DestinationMQTT, mqttdest.New(mqttdest.Config{Connections: conns, Logger: logger, NodeID: c.NodeID}))
	return r
}
