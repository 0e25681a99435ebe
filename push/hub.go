package push

import (
	"context"
	"net/http"

	"github.com/heraldhq/herald/store"
)

// DeliverOutcome says what became of a message handed to this node.
type DeliverOutcome int

const (
	// NotConnected: the user agent has no session on this node (or its
	// queue is full); the caller stores the message.
	NotConnected DeliverOutcome = iota
	// Delivered: the user agent acked it (or it had TTL 0 and was written).
	Delivered
	// Stored: it was written to the user agent but not acked within
	// AckWait, so the hub stored it; the user agent's ack deletes it.
	Stored
)

// hub is the connection side of one node: the user agents connected here.
type hub struct {
	s *Server
}

func newHub(s *Server) *hub { return &hub{s: s} }

// Deliver hands m to the user agent m.UAID if it is connected here and
// returns once the outcome is final (see DeliverOutcome): a 201 may be sent
// for Delivered and Stored.
func (h *hub) Deliver(ctx context.Context, m *store.PushMessage) (DeliverOutcome, error) {
	return NotConnected, nil
}

// Notify asks the session of uaid, if connected here, to check storage;
// it reports whether uaid is connected here.
func (h *hub) Notify(uaid string) bool { return false }

// ServeHTTP upgrades a request to a push WebSocket session.
func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {}

// Connected counts the user agents in session on this node.
func (h *hub) Connected() int { return 0 }

// Close ends every session (unacked direct messages are stored) and waits.
func (h *hub) Close() {}
