package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The listen protocol (docs/api.md, "Listen"): a listen subscription's
// deliveries arrive over the WebSocket of GET /v1/subscriptions/{id}/listen
// as request frames; the listener answers each with a response frame.

// ListenCloseReplaced is the close code of a session another listener of
// the same subscription replaced: reconnecting would replace that one in
// turn, so a listener should stop.
const ListenCloseReplaced = 4001

// ListenCloseGone is the close code of a session whose subscription was
// deleted or moved to another destination type: a listener should stop.
const ListenCloseGone = 4002

// listenMaxFrame bounds a frame from the server: a request carries the
// event's body base64-encoded, and --max-body-bytes (1 MiB by default)
// bounds that body; 64 MiB leaves room for any sane setting.
const listenMaxFrame = 64 << 20

// listenSilence is how long a session may go without a frame or ping from
// the server before the listener takes it for dead (the server pings
// every 15 s).
const listenSilence = 60 * time.Second

// ListenRequest is one delivery attempt: the webhook request herald would
// have sent, with its Standard Webhooks headers, signed over Body.
type ListenRequest struct {
	Method     string
	Headers    map[string]string
	Body       []byte
	Timeout    time.Duration
	EventID    string
	EventType  string
	DeliveryID string
	Attempt    int
}

// ListenResponse is the listener's answer: the local receiver's status,
// headers and start of its body (at most ListenSession.MaxBodyBytes are
// sent), or Error when no answer arrived. herald records it as the
// attempt's result and classifies it as a webhook answer.
type ListenResponse struct {
	Status  int
	Headers map[string]string
	Body    string
	Error   string
}

// listenFrame is a frame of either direction (listendest.Frame).
type listenFrame struct {
	Type            string            `json:"type"`
	SubscriptionID  string            `json:"subscription_id,omitempty"`
	MaxBodyBytes    int               `json:"max_body_bytes,omitempty"`
	ID              string            `json:"id,omitempty"`
	Method          string            `json:"method,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	Body            []byte            `json:"body,omitempty"`
	TimeoutMS       int64             `json:"timeout_ms,omitempty"`
	EventID         string            `json:"event_id,omitempty"`
	EventType       string            `json:"event_type,omitempty"`
	DeliveryID      string            `json:"delivery_id,omitempty"`
	Attempt         int               `json:"attempt,omitempty"`
	Status          int               `json:"status,omitempty"`
	ResponseHeaders map[string]string `json:"response_headers,omitempty"`
	Excerpt         string            `json:"excerpt,omitempty"`
	Error           string            `json:"error,omitempty"`
}

// ListenSession is a connected listener of one subscription.
type ListenSession struct {
	SubscriptionID string
	// MaxBodyBytes is how much of a response body the server keeps.
	MaxBodyBytes int

	conn *websocket.Conn
	wmu  sync.Mutex
}

// Listen connects a listener to subscription id (a listen destination).
// An answer other than the upgrade is an *APIError (409 conflict: not a
// listen subscription), no answer a *ConnError.
func (c *Client) Listen(ctx context.Context, id string) (*ListenSession, error) {
	u, err := url.Parse(c.BaseURL + pathID("/v1/subscriptions/", id) + "/listen")
	if err != nil {
		return nil, fmt.Errorf("building the listen URL: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	}
	h := http.Header{}
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		h.Set("User-Agent", c.UserAgent)
	}
	d := websocket.Dialer{HandshakeTimeout: DefaultTimeout, Proxy: http.ProxyFromEnvironment}
	conn, resp, err := d.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, decodeError(resp)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ConnError{URL: c.BaseURL, Err: err}
	}
	conn.SetReadLimit(listenMaxFrame)
	_ = conn.SetReadDeadline(time.Now().Add(listenSilence))
	var hello listenFrame
	if err := conn.ReadJSON(&hello); err != nil {
		_ = conn.Close()
		return nil, &ConnError{URL: c.BaseURL, Err: fmt.Errorf("no hello from the listen endpoint: %w", err)}
	}
	if hello.Type != "hello" {
		_ = conn.Close()
		return nil, &ConnError{URL: c.BaseURL, Err: fmt.Errorf("the listen endpoint sent %q first, not hello", hello.Type)}
	}
	return &ListenSession{SubscriptionID: hello.SubscriptionID, MaxBodyBytes: hello.MaxBodyBytes, conn: conn}, nil
}

// ListenClosedError is how a session ended: the server's close code and
// reason, or Code 1006 (abnormal) when the connection broke.
type ListenClosedError struct {
	Code   int
	Reason string
}

func (e *ListenClosedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("listen session closed (%d): %s", e.Code, e.Reason)
	}
	return fmt.Sprintf("listen session closed (%d)", e.Code)
}

// Serve answers the session's requests with handle, each in a goroutine
// of its own (herald may send several at once), until ctx ends (nil
// returned; the session is closed) or the session does (a
// *ListenClosedError). handle's context ends at the request's timeout.
func (s *ListenSession) Serve(ctx context.Context, handle func(context.Context, *ListenRequest) *ListenResponse) error {
	// Control frames (close, pong) need no lock: gorilla lets
	// WriteControl run beside WriteMessage.
	stop := context.AfterFunc(ctx, func() {
		_ = s.conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, "listener stopped"), time.Now().Add(time.Second))
		_ = s.conn.Close()
	})
	defer stop()
	defer s.conn.Close()
	s.conn.SetPingHandler(func(data string) error {
		_ = s.conn.SetReadDeadline(time.Now().Add(listenSilence))
		return s.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(10*time.Second))
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		_ = s.conn.SetReadDeadline(time.Now().Add(listenSilence))
		var f listenFrame
		if err := s.conn.ReadJSON(&f); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return &ListenClosedError{Code: ce.Code, Reason: ce.Text}
			}
			return &ListenClosedError{Code: websocket.CloseAbnormalClosure, Reason: err.Error()}
		}
		if f.Type != "request" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			timeout := time.Duration(f.TimeoutMS) * time.Millisecond
			if timeout <= 0 {
				timeout = DefaultTimeout
			}
			hctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			res := handle(hctx, &ListenRequest{Method: f.Method, Headers: f.Headers, Body: f.Body, Timeout: timeout,
				EventID: f.EventID, EventType: f.EventType, DeliveryID: f.DeliveryID, Attempt: f.Attempt})
			if res == nil {
				res = &ListenResponse{Error: "the listener gave no answer"}
			}
			body := res.Body
			if s.MaxBodyBytes > 0 && len(body) > s.MaxBodyBytes {
				body = strings.ToValidUTF8(body[:s.MaxBodyBytes], "")
			}
			ans := listenFrame{Type: "response", ID: f.ID, Status: res.Status, ResponseHeaders: boundHeaders(res.Headers), Excerpt: body, Error: res.Error}
			b, err := json.Marshal(ans)
			if err != nil {
				return
			}
			s.wmu.Lock()
			_ = s.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			_ = s.conn.WriteMessage(websocket.TextMessage, b)
			s.wmu.Unlock()
		}()
	}
}

// Close ends the session.
func (s *ListenSession) Close() error {
	return s.conn.Close()
}

// Bounds of the headers an answer carries: the server refuses an answer
// of more than 64 and keeps fewer, shorter ones still.
const (
	listenMaxHeaders     = 48
	listenMaxHeaderValue = 512
)

func boundHeaders(h map[string]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(h), listenMaxHeaders))
	for name, v := range h {
		if len(out) == listenMaxHeaders {
			break
		}
		if len(v) > listenMaxHeaderValue {
			v = strings.ToValidUTF8(v[:listenMaxHeaderValue], "")
		}
		out[name] = v
	}
	return out
}
