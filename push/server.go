package push

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/heraldhq/herald/store"
)

// Defaults.
const (
	DefaultMsgLimit         = 150
	DefaultAckWait          = time.Second
	DefaultPingInterval     = 300 * time.Second
	DefaultPingTimeout      = 4 * time.Second
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultBroadcastPoll    = 30 * time.Second
	DefaultIdleExpiry       = 60 * 24 * time.Hour
	// BatchSize is how many stored messages are sent before waiting for
	// all of them to be acked.
	BatchSize = 10
	// ClientChannelCapacity bounds the messages written to one connected
	// user agent and awaiting its ack (autopush-rs: 128); beyond it the
	// sender is answered 429 (QueueFull) and nothing is stored.
	ClientChannelCapacity = 128
	// handoffDialTimeout bounds connecting to another node: a node that
	// accepts no connection within it is taken for gone (handoffTimeout
	// bounds the whole call).
	handoffDialTimeout = 3 * time.Second
)

// Config configures the push service of one node.
type Config struct {
	Store store.PushStore
	Keys  *Keys
	// EndpointURL is the public base URL endpoints are built on
	// (scheme://host[:port], no trailing slash). VAPID's aud must equal
	// its origin.
	EndpointURL string
	// NodeID is what the router record stores for this node: NewNodeID of
	// its internal URL (http://host:port of --internal-listen), which other
	// nodes call, made unique to this process. On a single node it may be
	// any unique string.
	NodeID string
	// MsgLimit: a session that reads more than this many stored messages
	// of the backlog that existed when it connected (created before its
	// hello) resets the uaid (default DefaultMsgLimit). Messages stored
	// while it is connected never count.
	MsgLimit int
	// AckWait is how long a direct delivery waits for the user agent's ack
	// before storing the message (and then answering the sender).
	AckWait      time.Duration
	PingInterval time.Duration
	PingTimeout  time.Duration
	// HandshakeTimeout bounds the time to hello, and, after it, the time
	// from a frame's first byte to its last (ADR 0027).
	HandshakeTimeout time.Duration
	BroadcastPoll    time.Duration
	// MaxConns caps the push sessions of this node (0: no cap) and
	// MaxConnsPerIP those of one client address (an IPv6 /64; 0: no cap).
	// A WebSocket upgrade over either is answered 503 before the upgrade,
	// so a refused client costs no session. herald serve derives MaxConns
	// from RLIMIT_NOFILE (--push-max-conns); MaxConnsPerIP defaults to
	// DefaultMaxConnsPerIP there.
	MaxConns      int
	MaxConnsPerIP int
	// Limits caps stored messages, channels, registers and sends (zero
	// fields: no cap; herald serve passes DefaultLimits unless flags say
	// otherwise).
	Limits Limits
	// HTTPClient calls other nodes' internal listeners (default: a client
	// of its own with keep-alive connections).
	HTTPClient *http.Client
	// TLSClientConfig, when set, is the default client's TLS configuration
	// for https:// node URLs (mutual TLS: the client certificate and the
	// CA that signed the other nodes').
	TLSClientConfig *tls.Config
	Observer        Observer
	Logger          *slog.Logger
	Now             func() time.Time
}

// Server is the push service of one node.
type Server struct {
	cfg      Config
	hub      *hub
	audience string // origin of EndpointURL: VAPID's aud
	endpoint string // EndpointURL without a trailing slash
	client   *http.Client
	mux      *http.ServeMux // endpoint routes
	// patterns are the public routes, as ServeMux patterns (Patterns).
	patterns []string
	internal *http.ServeMux // node-to-node routes
	limit    *sessionLimit
	// sendLimit holds the token buckets of the endpoints (Limits.SendRate).
	sendLimit *keyedLimiter[endpointKey]
	// vapid remembers verified VAPID tokens (vapid_cache.go).
	vapid *VAPIDCache
	// endpoints remembers decrypted endpoint tokens (endpoint_cache.go).
	endpoints *endpointCache
	// nudges counts the retries of failed nudges (nudge.go).
	nudges nudger
}

// New builds the push service of one node and starts its broadcast poller;
// Close stops it.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Keys == nil {
		return nil, errors.New("push: Config.Store and Config.Keys are required")
	}
	u, err := url.Parse(cfg.EndpointURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("push: Config.EndpointURL must be an absolute http(s) URL")
	}
	if cfg.NodeID == "" {
		return nil, errors.New("push: Config.NodeID is required")
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	s := &Server{
		cfg:       cfg,
		audience:  u.Scheme + "://" + u.Host,
		endpoint:  strings.TrimRight(cfg.EndpointURL, "/"),
		client:    cfg.HTTPClient,
		limit:     newSessionLimit(max(cfg.MaxConns, 0), max(cfg.MaxConnsPerIP, 0)),
		vapid:     NewVAPIDCache(0),
		endpoints: newEndpointCache(0),
	}
	s.sendLimit = newKeyedLimiter[endpointKey](cfg.Limits.SendRate, cfg.Limits.SendBurst)
	if s.client == nil {
		s.client = &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: handoffDialTimeout}).DialContext,
			TLSClientConfig:     cfg.TLSClientConfig,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	s.hub = newHub(s)
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	handle := func(pattern string, h http.HandlerFunc) {
		s.mux.Handle(pattern, h)
		s.patterns = append(s.patterns, pattern)
	}
	handle("POST /wpush/{api}/{token}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("api") {
		case "v1":
			s.send(w, r, 1, r.PathValue("token"))
		case "v2":
			s.send(w, r, 2, r.PathValue("token"))
		default:
			s.reject(w, errInvalidToken("unknown endpoint version"))
		}
	})
	handle("POST /wpush/{token}", func(w http.ResponseWriter, r *http.Request) { s.send(w, r, 1, r.PathValue("token")) })
	handle("DELETE /m/{id}", s.deleteMessage)
	handle("/push/ws", s.upgrade)
	// Wrap also upgrades WebSocket requests to / (not a mux route).
	s.patterns = append(s.patterns, "GET /")

	s.internal = http.NewServeMux()
	s.internal.HandleFunc("PUT /push/{uaid}", s.internalPush)
	s.internal.HandleFunc("PUT /notif/{uaid}", s.internalNotif)
}

// Wrap serves the push routes and passes every other request to next:
// WebSocket upgrades on / and /push/ws, POST /wpush/{v1,v2}/{token},
// POST /wpush/{token} and DELETE /m/{id}. Any other request to / (a
// browser's GET) is next's.
func (s *Server) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p == "/" && websocket.IsWebSocketUpgrade(r):
			s.upgrade(w, r)
			return
		case r.Method == http.MethodPost && strings.HasPrefix(p, "/wpush/"):
			// Every message comes this way: its plain paths are matched
			// here, not twice by the mux (Handler, then ServeHTTP).
			if version, token, ok := sendPath(r); ok {
				s.send(w, r, version, token)
				return
			}
			fallthrough
		case Handles(r):
			if _, pattern := s.mux.Handler(r); pattern != "" {
				s.mux.ServeHTTP(w, r)
				return
			}
			if strings.HasPrefix(p, "/wpush/") || strings.HasPrefix(p, "/m/") {
				// autopush answers POST only on endpoints (DELETE on /m).
				w.Header().Set("Allow", allowFor(p))
				WriteError(w, &Error{Status: http.StatusMethodNotAllowed, Errno: ErrnoInternal,
					Message: "method " + r.Method + " not allowed"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sendPath reads the plain forms of the send routes: /wpush/v1/{token},
// /wpush/v2/{token} and /wpush/{token}, with no escapes, empty segments or
// trailing slash. Anything else is left to the mux (ok false), which
// answers as its patterns say.
func sendPath(r *http.Request) (version int, token string, ok bool) {
	if r.URL.RawPath != "" {
		return 0, "", false
	}
	rest := r.URL.Path[len("/wpush/"):]
	api, tok, two := strings.Cut(rest, "/")
	if !two {
		return 1, rest, rest != ""
	}
	if tok == "" || strings.IndexByte(tok, '/') >= 0 {
		return 0, "", false
	}
	switch api {
	case "v1":
		return 1, tok, true
	case "v2":
		return 2, tok, true
	}
	return 0, "", false
}

// Handles reports whether r is one of the push service's public requests
// (those Wrap serves): a WebSocket upgrade on /, anything on /push/ws,
// /wpush/… and /m/…. herald serve routes them to --push-listen.
func Handles(r *http.Request) bool {
	p := r.URL.Path
	return (p == "/" && websocket.IsWebSocketUpgrade(r)) ||
		p == "/push/ws" || strings.HasPrefix(p, "/wpush/") || strings.HasPrefix(p, "/m/")
}

// upgrade starts a push session unless this node or the client's address
// is at its session cap (MaxConns, MaxConnsPerIP): then 503, before the
// upgrade. The slot is taken before the upgrade and released when the
// socket closes, so no session ever has to be closed for being one too
// many (the 1013 close code is never needed).
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	release, ok := s.limit.acquire(clientKey(r))
	if !ok {
		WriteError(w, &Error{Status: http.StatusServiceUnavailable, Errno: ErrnoRetry,
			Message: "this node holds as many push connections as it may; try again later"})
		return
	}
	// A read deadline on the request (herald serve sets one on requests
	// with a body, so none can trickle in) must not end the session: the
	// session bounds its own reads (handshake timeout, pings).
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	hw := &hijackWriter{ResponseWriter: w, release: release}
	s.hub.ServeHTTP(hw, r)
	if !hw.hijacked {
		release() // the upgrader refused the request
	}
}

func allowFor(p string) string {
	if strings.HasPrefix(p, "/m/") {
		return http.MethodDelete
	}
	return http.MethodPost
}

// InternalHandler serves the node-to-node routes of --internal-listen:
// PUT /push/{uaid} and PUT /notif/{uaid}, with the bearer token of
// Keys.InternalToken. It must never be mounted on the public listener.
func (s *Server) InternalHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !s.cfg.Keys.CheckInternalToken(tok, s.cfg.Now()) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		s.internal.ServeHTTP(w, r)
	})
}

// BroadcastPut sets a broadcast's version in the store and makes this
// node's subscribed user agents receive it on their next ping tick (other
// nodes load it within BroadcastPoll).
func (s *Server) BroadcastPut(ctx context.Context, id, version string) error {
	if err := s.cfg.Store.PushBroadcastPut(ctx, &store.PushBroadcastPutParams{
		ID: id, Version: version, Now: s.cfg.Now().UTC(),
	}); err != nil {
		return err
	}
	return s.broadcastChanged(ctx)
}

// BroadcastList returns every broadcast with its version.
func (s *Server) BroadcastList(ctx context.Context) (map[string]string, error) {
	return s.cfg.Store.PushBroadcastList(ctx)
}

// Connected counts the user agents in session on this node.
func (s *Server) Connected() int { return s.hub.Connected() }

// Close ends every session (unacked direct messages are stored first) and
// stops the broadcast poller. Close it before the store.
func (s *Server) Close() error {
	s.hub.Close()
	return nil
}

// Patterns lists the public routes Wrap serves, as ServeMux patterns
// (the WebSocket upgrade on / included), so a test can hold them against
// the OpenAPI document. The internal routes are not public and not listed.
func (s *Server) Patterns() []string { return slices.Clone(s.patterns) }

// EndpointURL is the base URL of this node's push endpoints.
func (s *Server) EndpointURL() string { return s.endpoint }
