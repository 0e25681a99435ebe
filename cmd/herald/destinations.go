package main

import (
	"log/slog"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	amqpdest "github.com/heraldhq/herald/destination/amqp"
	listendest "github.com/heraldhq/herald/destination/listen"
	mqttdest "github.com/heraldhq/herald/destination/mqtt"
	natsdest "github.com/heraldhq/herald/destination/nats"
	redisdest "github.com/heraldhq/herald/destination/redis"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// newDestinations builds the Router the engine sends every attempt
// through: webhooks by sender, each other destination type by its own
// package. One Register line per type. The broker publishers dial nothing
// until their first attempt; the Router is closed at shutdown, after the
// engine stopped (heraldNode.stop). The listen destination's Hub is
// returned too: the API serves its listeners' WebSockets.
func newDestinations(c *config, s store.Store, sender *webhook.Sender, userAgent string, logger *slog.Logger) (*destination.Router, *listendest.Hub) {
	_ = c // used by the types registered below
	// conns resolves the operator-owned connections the broker publishers
	// deliver through: from the store, cached for
	// destination.DefaultConnectionTTL so an attempt costs no read.
	conns := destination.NewCache(s, 0)
	r := destination.NewRouter(sender)
	r.Register(herald.DestinationWebPush, newWebPushPublisher(c, s, sender))
	r.Register(herald.DestinationAMQP, amqpdest.New(amqpdest.Config{Connections: conns, Logger: logger}))
	r.Register(herald.DestinationNATS, natsdest.New(natsdest.Config{Connections: conns, Logger: logger}))
	r.Register(herald.DestinationRedis, redisdest.New(redisdest.Config{Connections: conns, Logger: logger}))
	r.Register(herald.DestinationMQTT, mqttdest.New(mqttdest.Config{Connections: conns, Logger: logger, NodeID: c.NodeID}))
	listeners := listendest.New(listendest.Config{UserAgent: userAgent, Logger: logger})
	r.Register(herald.DestinationListen, listeners)
	return r, listeners
}
