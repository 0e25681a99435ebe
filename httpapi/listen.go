package httpapi

import (
	"net/http"

	"github.com/gorilla/websocket"

	"github.com/heraldhq/herald"
)

// Listener serves the WebSocket of a listen subscription's listener
// (*listendest.Hub implements it).
type Listener interface {
	// Serve upgrades r and serves the session until it ends. An error
	// means the upgrade failed and was answered already.
	Serve(w http.ResponseWriter, r *http.Request, subscriptionID string) error
	// Drop ends the listener of subscriptionID connected to this node, if
	// any, telling it the subscription is gone or no longer a listen
	// destination (it stops instead of reconnecting).
	Drop(subscriptionID string)
}

// dropListener ends a listener whose subscription was deleted or moved
// to another destination type. Only this node's: a listener on another
// node stays connected, idle, until it reconnects and is refused.
func (s *server) dropListener(id string) {
	if s.cfg.Listen != nil {
		s.cfg.Listen.Drop(id)
	}
}

// subscriptionListen is GET /v1/subscriptions/{id}/listen (ADR 0024):
// the subscription must be visible to the token (a tenant-confined token:
// its own tenant's only) and of destination type listen; then the
// request is upgraded and the Listener serves it. It is authenticated by
// the bearer token alone, never a cookie, so it needs no origin check.
func (s *server) subscriptionListen(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.visibleSubscription(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	if t := sub.Dest().Type; t != herald.DestinationListen {
		return herald.Errorf(herald.CodeConflict,
			"subscription %s delivers to a %s destination; only a listen destination takes a listener (PATCH it to {\"destination\": {\"type\": \"listen\"}})", sub.ID, t)
	}
	if !websocket.IsWebSocketUpgrade(r) {
		return herald.Errorf(herald.CodeUnprocessable,
			"this endpoint is a WebSocket: connect with `herald listen --subscription %s --forward URL`", sub.ID)
	}
	if s.cfg.Listen == nil {
		return herald.Errorf(herald.CodeNotFound, "listen destinations are not served here")
	}
	_ = s.cfg.Listen.Serve(w, r, sub.ID)
	return nil
}
