package main

import (
	"log/slog"

	"github.com/heraldhq/herald"

	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// newDestinations builds the Router the engine sends every attempt
// through: webhooks by sender, each other destination type by its own
// package. One Register line per type.
func newDestinations(c *config, s store.Store, sender *webhook.Sender, logger *slog.Logger) *destination.Router {
	_, _, _ = c, s, logger // used by the types registered below
	r := destination.NewRouter(sender)
	r.Register(herald.DestinationWebPush, newWebPushPublisher(c, s, sender))
	return r
}
