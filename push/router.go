package push

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/heraldhq/herald/store"
)

// maxHandoffBytes bounds an internal hand-off body: a message of
// MaxBodyBytes, base64-encoded by JSON, plus its fields.
const maxHandoffBytes = 64 << 10

// NewNodeID returns a node id for a process whose internal listener other
// nodes reach at internalURL: the URL with a random fragment
// ("http://10.0.0.5:8081#3f9c…"). The fragment makes the id unique to
// this process, so two nodes given the same URL by mistake, or a node and
// its restarted self, never take each other's router records for their
// own; it is never sent (nodeURL strips it). An empty internalURL (no
// internal listener) gives "local#…", which no other node can call.
func NewNodeID(internalURL string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if internalURL == "" {
		internalURL = "local"
	}
	return strings.TrimRight(internalURL, "/") + "#" + hex.EncodeToString(b[:])
}

// nodeURL is the internal URL of a node id: the id without its fragment,
// "" when it names no http(s) URL (a node without an internal listener).
func nodeURL(id string) string {
	u, _, _ := strings.Cut(id, "#")
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return ""
	}
	return u
}

// handoffTimeout bounds one PUT /push hand-off. The remote node answers
// only once its user agent acked the message or the message is stored: a
// write to the user agent (writeWait, 10 s), AckWait, then a store call
// (storeTimeout, 10 s). The caller waits a little longer than all three,
// so a slow socket or a slow store on a live node is never taken for a
// dead node; with the defaults that is 10 + 1 + 10 + 2 = 23 s.
func handoffTimeout(ackWait time.Duration) time.Duration {
	return writeWait + ackWait + storeTimeout + handoffSlack
}

// notifTimeout bounds a PUT /notif nudge: the remote only starts a
// storage check and answers.
const notifTimeout = handoffSlack

// handoffSlack is the network's share of a node-to-node call.
const handoffSlack = 2 * time.Second

// errNodeUnreachable: no connection could be made to the node a router
// record names (refused, no route, no such host, dial timeout), or the
// record names no internal URL. Only this clears the record: a node that
// accepted the connection is alive, however slowly it answers.
var errNodeUnreachable = errors.New("push: node unreachable")

// isDialError reports whether err means the connection was never made.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// handoff is a message as one node hands it to another (PUT /push/{uaid}).
type handoff struct {
	ID        string            `json:"id"`
	ChannelID string            `json:"channel_id"`
	Topic     string            `json:"topic,omitempty"`
	Data      []byte            `json:"data,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	TTL       int               `json:"ttl"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
}

// handoffResult is the answer of PUT /push/{uaid} when the user agent is
// connected there.
type handoffResult struct {
	Outcome string `json:"outcome"` // "delivered" or "stored"
}

// handoffPush hands m to the node rt names. NotConnected, nil means the
// node answered that the user agent is not there; an error wrapping
// errNodeUnreachable means no connection could be made; any other error
// means the node was reached but did not answer in time or answered
// something else.
func (s *Server) handoffPush(ctx context.Context, rt *store.PushRoute, m *store.PushMessage) (DeliverOutcome, error) {
	body, err := json.Marshal(&handoff{
		ID: m.ID, ChannelID: m.ChannelID, Topic: m.Topic, Data: m.Data, Headers: m.Headers,
		TTL: m.TTL, CreatedAt: m.CreatedAt, ExpiresAt: m.ExpiresAt,
	})
	if err != nil {
		return NotConnected, err
	}
	resp, err := s.internalCall(ctx, rt.NodeID, "/push/"+url.PathEscape(m.UAID), body, handoffTimeout(s.cfg.AckWait))
	if err != nil {
		s.cfg.Observer.ObserveHandoff("push", "error")
		return NotConnected, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		var res handoffResult
		if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&res); err != nil {
			s.cfg.Observer.ObserveHandoff("push", "error")
			return NotConnected, fmt.Errorf("push: hand-off answer: %w", err)
		}
		s.cfg.Observer.ObserveHandoff("push", "ok")
		if res.Outcome == "stored" {
			return Stored, nil
		}
		return Delivered, nil
	case http.StatusNotFound:
		s.cfg.Observer.ObserveHandoff("push", "not_here")
		return NotConnected, nil
	case http.StatusTooManyRequests:
		s.cfg.Observer.ObserveHandoff("push", "ok")
		return QueueFull, nil
	}
	s.cfg.Observer.ObserveHandoff("push", "error")
	return NotConnected, fmt.Errorf("push: hand-off to %s answered %s", rt.NodeID, resp.Status)
}

// handoffNotif asks node to make uaid's session check storage, and reports
// whether node answered (200, or 404: no session there). A failure is
// counted; nudgeOwner tries again.
func (s *Server) handoffNotif(ctx context.Context, node, uaid string) bool {
	resp, err := s.internalCall(ctx, node, "/notif/"+url.PathEscape(uaid), nil, notifTimeout)
	if err != nil {
		s.cfg.Observer.ObserveHandoff("notif", "error")
		return false
	}
	_ = resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		s.cfg.Observer.ObserveHandoff("notif", "ok")
	case http.StatusNotFound:
		// No session there: the user agent's next hello reads the storage.
		s.cfg.Observer.ObserveHandoff("notif", "not_here")
	default:
		s.cfg.Observer.ObserveHandoff("notif", "error")
		return false
	}
	return true
}

// internalCall makes a PUT to the node with id node. Errors wrap
// errNodeUnreachable when no connection could be made.
func (s *Server) internalCall(ctx context.Context, node, path string, body []byte, timeout time.Duration) (*http.Response, error) {
	base := nodeURL(node)
	if base == "" {
		return nil, fmt.Errorf("%w: %q has no internal URL", errNodeUnreachable, node)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	// The URL is a herald node's internal listener, from a route that node
	// wrote in the store; no client of herald names it.
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+path, bytes.NewReader(body)) //nolint:gosec // G704: see above
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Keys.InternalToken(s.cfg.Now()))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req) //nolint:gosec // G704: a herald node's URL (above)
	if err != nil {
		cancel()
		if isDialError(err) {
			return nil, fmt.Errorf("%w: %w", errNodeUnreachable, err)
		}
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// internalPush serves PUT /push/{uaid}: deliver to the session here and
// answer once the message is acked or stored (200), or 404 when the user
// agent is not in session here.
func (s *Server) internalPush(w http.ResponseWriter, r *http.Request) {
	var h handoff
	if err := json.NewDecoder(io.LimitReader(r.Body, maxHandoffBytes)).Decode(&h); err != nil {
		http.Error(w, "bad hand-off body", http.StatusBadRequest)
		return
	}
	m := &store.PushMessage{
		ID: h.ID, UAID: r.PathValue("uaid"), ChannelID: h.ChannelID, Topic: h.Topic, Data: h.Data,
		Headers: h.Headers, TTL: h.TTL, CreatedAt: h.CreatedAt, ExpiresAt: h.ExpiresAt,
	}
	if m.ID == "" || m.ChannelID == "" {
		http.Error(w, "bad hand-off body", http.StatusBadRequest)
		return
	}
	out, err := s.hub.Deliver(r.Context(), m, "")
	if err != nil {
		http.Error(w, "delivery failed", http.StatusInternalServerError)
		return
	}
	switch out {
	case Delivered:
		writeJSON(w, &handoffResult{Outcome: "delivered"})
	case Stored:
		writeJSON(w, &handoffResult{Outcome: "stored"})
	case QueueFull:
		http.Error(w, "user agent's queue is full", http.StatusTooManyRequests)
	default:
		http.Error(w, "user agent not connected here", http.StatusNotFound)
	}
}

// internalNotif serves PUT /notif/{uaid}: the session here checks storage
// (200), or 404 when the user agent is not in session here.
func (s *Server) internalNotif(w http.ResponseWriter, r *http.Request) {
	if !s.hub.Notify(r.PathValue("uaid")) {
		http.Error(w, "user agent not connected here", http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
