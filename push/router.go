package push

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/heraldhq/herald/store"
)

// maxHandoffBytes bounds an internal hand-off body: a message of
// MaxBodyBytes, base64-encoded by JSON, plus its fields.
const maxHandoffBytes = 64 << 10

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
// node answered that the user agent is not there; an error means the node
// could not be reached or answered something else.
func (s *Server) handoffPush(ctx context.Context, rt *store.PushRoute, m *store.PushMessage) (DeliverOutcome, error) {
	body, err := json.Marshal(&handoff{
		ID: m.ID, ChannelID: m.ChannelID, Topic: m.Topic, Data: m.Data, Headers: m.Headers,
		TTL: m.TTL, CreatedAt: m.CreatedAt, ExpiresAt: m.ExpiresAt,
	})
	if err != nil {
		return NotConnected, err
	}
	resp, err := s.internalCall(ctx, rt.NodeID, "/push/"+url.PathEscape(m.UAID), body, s.cfg.AckWait+handoffTimeout)
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

// handoffNotif asks node to make uaid's session check storage. Failures are
// only counted: the message is stored, and the user agent's next connect
// reads it.
func (s *Server) handoffNotif(ctx context.Context, node, uaid string) {
	resp, err := s.internalCall(ctx, node, "/notif/"+url.PathEscape(uaid), nil, handoffTimeout)
	if err != nil {
		s.cfg.Observer.ObserveHandoff("notif", "error")
		return
	}
	_ = resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		s.cfg.Observer.ObserveHandoff("notif", "ok")
	case http.StatusNotFound:
		s.cfg.Observer.ObserveHandoff("notif", "not_here")
	default:
		s.cfg.Observer.ObserveHandoff("notif", "error")
	}
}

func (s *Server) internalCall(ctx context.Context, node, path string, body []byte, timeout time.Duration) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, node+path, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.Keys.InternalToken())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
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
	out, err := s.hub.Deliver(r.Context(), m)
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
