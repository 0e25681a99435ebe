// Package listendest is the listen destination (ADR 0024): a
// subscription of type "listen" delivers to the `herald listen` CLI
// connected to it over a WebSocket (GET /v1/subscriptions/{id}/listen).
// Each attempt carries the webhook request herald would have sent (the
// same Standard Webhooks headers and body, signed with the subscription's
// secrets); the CLI forwards it to a local URL and answers with the
// status, headers and start of the body it got, which the attempt records
// and classifies exactly as a webhook answer (webhook.ClassifyStatus).
//
// The Hub holds the listeners of this node only. An attempt claimed by a
// node that does not hold the subscription's listener fails like one with
// no listener at all (connection class, "no listener connected to this
// node") and retries through the tiers; see docs/api.md for running
// listen against several nodes.
package listendest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/webhook"
)

// Protocol limits and timings.
const (
	// MaxFrameBytes bounds a frame the listener sends (its answers): the
	// excerpt (herald.ResponseExcerptLimit) and bounded headers fit many
	// times over. A larger frame ends the session.
	MaxFrameBytes = 64 << 10
	// MaxAnswerHeaders bounds the response headers an answer may carry;
	// the attempt keeps fewer still (herald.BoundHeaders).
	MaxAnswerHeaders = 64
	// DefaultPingInterval is how often the Hub pings a listener.
	DefaultPingInterval = 15 * time.Second
	// DefaultPongWait is how long a listener may stay silent (no pong, no
	// frame) before it is dropped: three missed pings.
	DefaultPongWait = 45 * time.Second
	// writeWait bounds one frame's write.
	writeWait = 10 * time.Second
	// CloseReplaced is the close code a listener gets when another one
	// connected to the same subscription took its place: the CLI stops
	// instead of reconnecting (two listeners would take turns for ever).
	CloseReplaced = 4001
	// CloseGone is the close code of a listener whose subscription was
	// deleted or moved to another destination type: the CLI stops.
	CloseGone = 4002
	// CloseShutdown is the close code of a node shutting down: the CLI
	// reconnects (to this node restarted, or another one).
	CloseShutdown = websocket.CloseGoingAway
)

// Frame types.
const (
	// FrameHello is the Hub's first frame: the subscription id and the
	// limits of answers.
	FrameHello = "hello"
	// FrameRequest carries one attempt's webhook request.
	FrameRequest = "request"
	// FrameResponse is the listener's answer to one request.
	FrameResponse = "response"
)

// Frame is one WebSocket text message, a JSON object, in either
// direction. Type says which fields apply.
type Frame struct {
	Type string `json:"type"`

	// hello
	SubscriptionID string `json:"subscription_id,omitempty"`
	// MaxBodyBytes is how many bytes of a response body an answer should
	// carry (herald.ResponseExcerptLimit); more is cut.
	MaxBodyBytes int `json:"max_body_bytes,omitempty"`

	// request and response: ID pairs an answer with its request.
	ID string `json:"id,omitempty"`

	// request: what herald would have sent as a webhook. Body is the
	// exact bytes signed (base64 in JSON); Headers one value per name.
	Method     string            `json:"method,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       []byte            `json:"body,omitempty"`
	TimeoutMS  int64             `json:"timeout_ms,omitempty"`
	EventID    string            `json:"event_id,omitempty"`
	EventType  string            `json:"event_type,omitempty"`
	DeliveryID string            `json:"delivery_id,omitempty"`
	Attempt    int               `json:"attempt,omitempty"`

	// response: Status and ResponseHeaders of the local answer and the
	// start of its body (Excerpt), or Error when the listener got no
	// answer (its forward URL refused, timed out, …).
	Status          int               `json:"status,omitempty"`
	ResponseHeaders map[string]string `json:"response_headers,omitempty"`
	Excerpt         string            `json:"excerpt,omitempty"`
	Error           string            `json:"error,omitempty"`
}

// Config configures a Hub. Zero values are the defaults.
type Config struct {
	// UserAgent is the user-agent of the requests, as the webhook Sender
	// has it (default webhook.DefaultUserAgent).
	UserAgent string
	// PingInterval and PongWait: see DefaultPingInterval, DefaultPongWait.
	PingInterval, PongWait time.Duration
	Logger                 *slog.Logger
}

// Hub holds this node's listeners, one per subscription, and is the
// listen destination's Publisher. Safe for concurrent use.
type Hub struct {
	cfg      Config
	upgrader websocket.Upgrader

	mu       sync.Mutex
	sessions map[string]*session // by subscription id
	closed   bool
}

var _ destination.Publisher = (*Hub)(nil)

// New returns an empty Hub.
func New(cfg Config) *Hub {
	if cfg.UserAgent == "" {
		cfg.UserAgent = webhook.DefaultUserAgent
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.PongWait <= 0 {
		cfg.PongWait = DefaultPongWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{
		cfg:      cfg,
		sessions: map[string]*session{},
		upgrader: websocket.Upgrader{
			ReadBufferSize:  4096,
			WriteBufferSize: 4096,
			// The session is authenticated by a bearer token the caller
			// sends itself, never by a cookie a browser would attach: a
			// page of another origin gains nothing, so no origin check.
			CheckOrigin: func(*http.Request) bool { return true },
		},
	}
}

// Connected reports whether a listener of subscriptionID is connected to
// this node.
func (h *Hub) Connected(subscriptionID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.sessions[subscriptionID]
	return ok
}

// Serve upgrades r to a WebSocket and serves it as subscriptionID's
// listener until either side ends it. The caller has authenticated r and
// checked the subscription is a listen destination the token may use. A
// listener already connected to the subscription on this node is closed
// with CloseReplaced: the newest wins, so a CLI restarted after its
// laptop slept is not refused while the old session times out. Serve
// returns once the session ended; an error before the upgrade has been
// answered already.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, subscriptionID string) error {
	// Lift any read deadline the server set for request bodies: the
	// session's own (pongs) rules from here.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return err // Upgrade answered the client
	}
	conn.SetReadLimit(MaxFrameBytes)
	s := &session{hub: h, subID: subscriptionID, conn: conn, pending: map[string]chan *Frame{}, done: make(chan struct{})}

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.close(CloseShutdown, "herald is shutting down")
		return nil
	}
	old := h.sessions[subscriptionID]
	h.sessions[subscriptionID] = s
	h.mu.Unlock()
	if old != nil {
		old.close(CloseReplaced, "another listener connected to this subscription")
	}
	h.cfg.Logger.Info("listener connected", "subscription", subscriptionID, "remote", r.RemoteAddr)

	if err := s.write(&Frame{Type: FrameHello, SubscriptionID: subscriptionID, MaxBodyBytes: herald.ResponseExcerptLimit}); err != nil {
		s.close(websocket.CloseAbnormalClosure, "")
	} else {
		go s.pinger()
		s.readLoop()
	}
	h.mu.Lock()
	if h.sessions[subscriptionID] == s {
		delete(h.sessions, subscriptionID)
	}
	h.mu.Unlock()
	h.cfg.Logger.Info("listener disconnected", "subscription", subscriptionID)
	return nil
}

// Drop ends subscriptionID's session on this node, if any, with
// CloseGone: the subscription was deleted or is no longer a listen
// destination.
func (h *Hub) Drop(subscriptionID string) {
	h.mu.Lock()
	s := h.sessions[subscriptionID]
	delete(h.sessions, subscriptionID)
	h.mu.Unlock()
	if s != nil {
		s.close(CloseGone, "the subscription was deleted or is no longer a listen destination")
	}
}

// Close ends every session (CloseShutdown) and refuses new ones; Sends
// after Close fail as if no listener were connected.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	sessions := h.sessions
	h.sessions = map[string]*session{}
	h.mu.Unlock()
	for _, s := range sessions {
		s.close(CloseShutdown, "herald is shutting down")
	}
}

// Send implements destination.Publisher: it hands the request to the
// subscription's listener and waits for its answer until the attempt's
// timeout (destination.Timeout).
func (h *Hub) Send(ctx context.Context, r *webhook.Request) webhook.Result {
	start := time.Now()
	res := h.send(ctx, r, start)
	res.Duration = time.Since(start)
	return res
}

func (h *Hub) send(ctx context.Context, r *webhook.Request, start time.Time) webhook.Result {
	ts := r.Timestamp
	if ts.IsZero() {
		ts = start
	}
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	hdr, fail := webhook.SignedHeaders(r, ts, h.cfg.UserAgent)
	if fail != nil {
		return *fail
	}
	hdr.Set("Content-Length", strconv.Itoa(len(r.Body)))
	sent := herald.AttemptHeaders(hdr)
	failed := func(class herald.ErrorClass, format string, args ...any) webhook.Result {
		return webhook.Result{Class: class, Message: fmt.Sprintf(format, args...), RequestHeaders: sent}
	}

	h.mu.Lock()
	s := h.sessions[r.SubscriptionID]
	h.mu.Unlock()
	if s == nil {
		return failed(herald.ErrorConnection,
			"no listener connected to this node (run: herald listen --subscription %s --forward URL)", r.SubscriptionID)
	}
	timeout := destination.Timeout(r)
	one := make(map[string]string, len(hdr))
	for name := range hdr {
		one[name] = hdr.Get(name)
	}
	f := &Frame{Type: FrameRequest, Method: method, Headers: one, Body: r.Body, TimeoutMS: timeout.Milliseconds(),
		EventID: r.EventID, EventType: r.EventType, DeliveryID: r.MsgID, Attempt: max(r.Attempt, 1)}
	ans, err := s.roundTrip(ctx, f, timeout)
	switch {
	case errors.Is(err, errTimeout):
		return failed(herald.ErrorTimeout, "the listener did not answer within %s", timeout)
	case errors.Is(err, errGone):
		return failed(herald.ErrorConnection, "the listener disconnected before answering")
	case err != nil:
		return failed(herald.ErrorConnection, "attempt cancelled")
	case ans.Error != "":
		return failed(herald.ErrorConnection, "the listener got no answer from its forward URL: %s", ans.Error)
	case ans.Status < 100 || ans.Status > 999:
		return failed(herald.ErrorInvalidRequest, "the listener answered an invalid status %d", ans.Status)
	}
	got := http.Header{}
	for name, v := range ans.ResponseHeaders {
		got.Set(name, v)
	}
	res := webhook.Result{Status: ans.Status, RequestHeaders: sent, ResponseHeaders: herald.AttemptHeaders(got),
		Excerpt: herald.CleanText(ans.Excerpt, herald.ResponseExcerptLimit)}
	webhook.ClassifyStatus(&res, got)
	return res
}

var (
	errTimeout = errors.New("no answer in time")
	errGone    = errors.New("listener gone")
)

// session is one listener's WebSocket.
type session struct {
	hub   *Hub
	subID string
	conn  *websocket.Conn
	seq   atomic.Uint64

	wmu sync.Mutex // serialises data frames (control frames need no lock)

	mu      sync.Mutex
	pending map[string]chan *Frame
	done    chan struct{}
	once    sync.Once
}

func (s *session) write(f *Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(writeWait))
	return s.conn.WriteMessage(websocket.TextMessage, b)
}

// roundTrip sends f and waits for its answer.
func (s *session) roundTrip(ctx context.Context, f *Frame, timeout time.Duration) (*Frame, error) {
	f.ID = strconv.FormatUint(s.seq.Add(1), 10)
	ch := make(chan *Frame, 1)
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return nil, errGone
	default:
	}
	s.pending[f.ID] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, f.ID)
		s.mu.Unlock()
	}()
	if err := s.write(f); err != nil {
		s.close(websocket.CloseAbnormalClosure, "")
		return nil, errGone
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case ans := <-ch:
		return ans, nil
	case <-s.done:
		return nil, errGone
	case <-t.C:
		return nil, errTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readLoop reads the listener's answers until the connection fails or
// stays silent beyond PongWait.
func (s *session) readLoop() {
	defer s.close(websocket.CloseNormalClosure, "")
	wait := s.hub.cfg.PongWait
	_ = s.conn.SetReadDeadline(time.Now().Add(wait))
	s.conn.SetPongHandler(func(string) error {
		return s.conn.SetReadDeadline(time.Now().Add(wait))
	})
	for {
		_, b, err := s.conn.ReadMessage()
		if err != nil {
			return
		}
		_ = s.conn.SetReadDeadline(time.Now().Add(wait))
		var f Frame
		if err := json.Unmarshal(b, &f); err != nil || f.Type != FrameResponse || len(f.ResponseHeaders) > MaxAnswerHeaders {
			s.close(websocket.CloseProtocolError, "expected a response frame")
			return
		}
		s.mu.Lock()
		ch := s.pending[f.ID]
		s.mu.Unlock()
		if ch != nil {
			select {
			case ch <- &f:
			default: // answered twice: the first answer counts
			}
		}
	}
}

func (s *session) pinger() {
	t := time.NewTicker(s.hub.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			// WriteControl may run beside WriteMessage (gorilla allows
			// it): a ping never waits behind a slow request frame.
			err := s.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait))
			if err != nil {
				s.close(websocket.CloseAbnormalClosure, "")
				return
			}
		}
	}
}

// close ends the session once, with a close frame of code (none for
// CloseAbnormalClosure), and fails the requests awaiting an answer.
func (s *session) close(code int, reason string) {
	s.once.Do(func() {
		s.mu.Lock()
		close(s.done)
		s.mu.Unlock()
		if code != websocket.CloseAbnormalClosure {
			_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
		}
		_ = s.conn.Close()
	})
}
