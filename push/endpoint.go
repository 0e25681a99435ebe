package push

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Message outcomes of ObserveMessageIn.
const (
	outcomeDirect   = "direct"
	outcomeStored   = "stored"
	outcomeDropped  = "dropped_ttl0"
	outcomeRejected = "rejected"
)

// send serves POST /wpush/{v1,v2}/{token} and /wpush/{token}: validate,
// route and answer 201 once the message was delivered (acked) or stored,
// or dropped for TTL 0 with nobody connected.
func (s *Server) send(w http.ResponseWriter, r *http.Request, version int, token string) {
	received := s.cfg.Now()
	ctx := r.Context()
	m, route, err := s.accept(ctx, r, version, token, received)
	if err != nil {
		s.reject(w, err)
		return
	}
	// One message id serves as the version sent to the user agent and as
	// the sender's Location: both name the same message.
	loc, err := s.cfg.Keys.MessageID(&MessageRef{UAID: m.UAID, ChannelID: m.ChannelID, ID: m.ID, Topic: m.Topic})
	if err != nil {
		s.reject(w, err)
		return
	}
	outcome, err := s.route(ctx, m, route, loc)
	if err != nil {
		s.reject(w, err)
		return
	}
	s.cfg.Observer.ObserveMessageIn(outcome, 0)
	w.Header().Set("Location", s.endpoint+"/m/"+loc)
	w.Header().Set("TTL", strconv.Itoa(m.TTL))
	w.WriteHeader(http.StatusCreated)
}

// accept validates a send request and returns the message to route.
func (s *Server) accept(ctx context.Context, r *http.Request, version int, token string, now time.Time) (*store.PushMessage, *store.PushRoute, error) {
	ep, err := s.endpoints.parse(s.cfg.Keys, token, version)
	if err != nil {
		return nil, nil, err
	}
	// Before the body is read: a flood costs a token decrypt per request.
	if ok, wait := s.sendLimit.allow(endpointKey{ep.UAID, ep.ChannelID}, now); !ok {
		return nil, nil, &Error{Status: http.StatusTooManyRequests, Errno: ErrnoRetry, RetryAfter: wait,
			Message: "too many messages to this subscription; retry later"}
	}
	body, err := readBody(r)
	if err != nil {
		return nil, nil, &Error{Status: http.StatusBadRequest, Errno: ErrnoInvalidCrypto, Message: "error reading the body", Err: err}
	}
	if len(body) > MaxBodyBytes {
		return nil, nil, &Error{Status: http.StatusRequestEntityTooLarge, Errno: ErrnoPayloadTooLarge,
			Message: "body larger than " + strconv.Itoa(MaxBodyBytes) + " bytes"}
	}
	hdr, err := ParseSendHeaders(r.Header, len(body) > 0)
	if err != nil {
		return nil, nil, err
	}
	vapid, err := s.vapid.Parse(r.Header, s.audience, now)
	if err != nil {
		return nil, nil, err
	}
	if ep.KeyHash != nil {
		if err := keyMatches(vapid, ep.KeyHash); err != nil {
			return nil, nil, err
		}
	}
	var route *store.PushRoute
	if hint := s.hub.knownRoute(ep.UAID, ep.ChannelID); hint.known {
		// In session here with the channel known registered: no store
		// read. ConnectedAt stays 0, so a session that ends meanwhile
		// clears no router record (disconnect matches nothing).
		route = &store.PushRoute{PushUser: store.PushUser{UAID: ep.UAID, NodeID: s.cfg.NodeID}, KeyHash: hint.keyHash}
	} else {
		route, err = s.cfg.Store.PushRouteGet(ctx, &store.PushRouteGetParams{UAID: ep.UAID, ChannelID: ep.ChannelID})
		if err != nil {
			return nil, nil, storeError(err)
		}
		if route.NodeID == s.cfg.NodeID {
			s.hub.learnRoute(hint, ep.ChannelID, route.KeyHash)
		}
	}
	if route.KeyHash != nil {
		// The channel is restricted to one application server key,
		// whatever the token's version says.
		if err := keyMatches(vapid, route.KeyHash); err != nil {
			return nil, nil, err
		}
	}
	if len(body) == 0 {
		body = nil
	}
	created := now.UTC().Truncate(time.Millisecond)
	m := &store.PushMessage{
		ID:        herald.NewID(herald.PrefixPushMessage),
		UAID:      ep.UAID,
		ChannelID: ep.ChannelID,
		Topic:     hdr.Topic,
		Data:      body,
		Headers:   hdr.Crypto,
		TTL:       hdr.TTL,
		CreatedAt: created,
		ExpiresAt: created.Add(time.Duration(hdr.TTL) * time.Second),
	}
	return m, route, nil
}

// keyMatches checks that a VAPID identification is present and signed with
// the application server key whose SHA-256 is want.
func keyMatches(v *VAPID, want []byte) error {
	if v == nil {
		return &Error{Status: http.StatusUnauthorized, Errno: ErrnoVAPID,
			Message: "this subscription is restricted to an application server key: VAPID authorization required"}
	}
	got := sha256.Sum256(v.PublicKey)
	if subtle.ConstantTimeCompare(got[:], want) != 1 {
		return &Error{Status: http.StatusUnauthorized, Errno: ErrnoVAPID,
			Message: "the VAPID key is not the key this subscription was registered with"}
	}
	return nil
}

// route delivers m to its user agent's node, or stores it. It returns the
// outcome for the metrics once the message is safe: acked by the user
// agent, or stored. version is m's message id, sent to a session here.
func (s *Server) route(ctx context.Context, m *store.PushMessage, rt *store.PushRoute, version string) (string, error) {
	if rt.NodeID != "" {
		var (
			out DeliverOutcome
			err error
		)
		if rt.NodeID == s.cfg.NodeID {
			out, err = s.hub.Deliver(ctx, m, version)
			if err != nil {
				return "", err
			}
			if out == NotConnected {
				// The record names this node but no session is here (a
				// restart, or a session that just ended): clear it unless
				// the user agent connected again since.
				s.disconnect(rt)
			}
		} else {
			out, err = s.handoffPush(ctx, rt, m)
			switch {
			case errors.Is(err, errNodeUnreachable):
				// No connection could be made: the node is gone. Clear the
				// record if it still names that connection, and store.
				s.cfg.Logger.Warn("push: node unreachable; storing", "node", rt.NodeID, "err", err)
				s.disconnect(rt)
			case err != nil:
				// The node is alive but did not answer in time (a stalled
				// store or socket there): keep its record, store, and
				// nudge it below so the session reads the message.
				s.cfg.Logger.Warn("push: hand-off failed; storing", "node", rt.NodeID, "err", err)
			case out == NotConnected:
				// The node answered that no session of the user agent is
				// there (it ended, or the record names an earlier process
				// at the same URL: node ids differ per process): clear the
				// record unless the user agent connected again since, as
				// the local branch does. A session still connected there
				// re-asserts its record (routerRefresh).
				s.disconnect(rt)
			}
		}
		switch out {
		case Delivered:
			return outcomeDirect, nil
		case Stored:
			return outcomeStored, nil
		case QueueFull:
			// Acks free the queue within AckWait.
			return "", &Error{Status: http.StatusTooManyRequests, Errno: ErrnoRetry, RetryAfter: s.cfg.AckWait,
				Message: "the user agent has too many messages awaiting its ack; retry later"}
		}
	}
	if m.TTL == 0 {
		// RFC 8030 §5.2: TTL 0 is for a user agent connected now; it is
		// discarded, and the sender still gets 201 (autopush does so).
		return outcomeDropped, nil
	}
	res, err := s.cfg.Store.PushMessageSave(ctx, &store.PushMessageSaveParams{
		UAID: m.UAID, Messages: []*store.PushMessage{m},
		MaxPerUAID: s.cfg.Limits.MaxMessagesPerUAID, MaxPerChannel: s.cfg.Limits.MaxMessagesPerChannel,
	})
	if err != nil {
		if errors.Is(err, herald.ErrNotFound) {
			return "", &Error{Status: http.StatusGone, Errno: ErrnoUserDeleted, Message: "the user agent was removed", Err: err}
		}
		return "", storeError(err)
	}
	if len(res.Unregistered) > 0 {
		return "", &Error{Status: http.StatusGone, Errno: ErrnoNoSubscription, Message: "subscription not found"}
	}
	if len(res.OverLimit) > 0 {
		return "", &Error{Status: http.StatusTooManyRequests, Errno: ErrnoRetry, RetryAfter: storedFullRetryAfter,
			Message: "the user agent has the most stored messages allowed; retry later"}
	}
	s.nudgeOwner(ctx, m.UAID)
	return outcomeStored, nil
}

// disconnect clears a router record that still names rt's connection.
func (s *Server) disconnect(rt *store.PushRoute) {
	ctx, cancel := storeCtx()
	defer cancel()
	if _, err := s.cfg.Store.PushUserDisconnect(ctx, &store.PushUserDisconnectParams{
		UAID: rt.UAID, NodeID: rt.NodeID, ConnectedAt: rt.ConnectedAt,
	}); err != nil {
		s.cfg.Logger.Warn("push: clearing a router record", "err", err)
	}
}

// deleteMessage serves DELETE /m/{id}: the sender withdraws a stored
// message (RFC 8030 §7.1-style). 204 whether or not it was still stored.
func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request) {
	ref, err := s.cfg.Keys.ParseMessageID(r.PathValue("id"))
	if err != nil {
		s.reject(w, err)
		return
	}
	if _, err := s.cfg.Store.PushMessageDelete(r.Context(), &store.PushMessageDeleteParams{
		UAID: ref.UAID, IDs: []string{ref.ID},
	}); err != nil {
		s.reject(w, storeError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// reject answers a failed request and counts it.
func (s *Server) reject(w http.ResponseWriter, err error) {
	var pe *Error
	if !errors.As(err, &pe) {
		pe = &Error{Status: http.StatusInternalServerError, Errno: ErrnoInternal, Message: "internal error", Err: err}
		s.cfg.Logger.Error("push: send failed", "err", err)
	}
	s.cfg.Observer.ObserveMessageIn(outcomeRejected, pe.Errno)
	WriteError(w, pe)
}

// storeError maps a store error to the endpoint's answer.
func storeError(err error) error {
	switch {
	case errors.Is(err, herald.ErrNotFound):
		return &Error{Status: http.StatusGone, Errno: ErrnoNoSubscription, Message: "subscription not found", Err: err}
	case errors.Is(err, herald.ErrStoreUnavailable), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Errno: ErrnoRetry, Message: "store unavailable; retry later", Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Errno: ErrnoInternal, Message: "internal error", Err: err}
}

// readBody reads at most MaxBodyBytes+1 bytes of r's body into one buffer
// sized by its Content-Length (io.ReadAll grows from 512 bytes): the
// spare byte takes the EOF, or shows the body is larger than it said.
func readBody(r *http.Request) ([]byte, error) {
	n := int64(512)
	if r.ContentLength >= 0 {
		n = min(r.ContentLength, MaxBodyBytes) + 1
	}
	body := io.LimitReader(r.Body, MaxBodyBytes+1)
	buf := make([]byte, 0, n)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		k, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
