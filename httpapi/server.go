package httpapi

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/eventtype"
	"github.com/heraldhq/herald/store"
)

// Publisher stores events durably with their fan-out deliveries
// (*ingest.Ingester implements it).
type Publisher interface {
	// PublishOne stores one event through group commit and returns once it
	// committed.
	PublishOne(ctx context.Context, ev *herald.Event) (store.EventInsertResult, error)
	// PublishMany stores events in one transaction; results are in input
	// order.
	PublishMany(ctx context.Context, evs []*herald.Event) ([]store.EventInsertResult, error)
}

// Authenticator decides who a bearer token acts as: a nil principal means
// the token is not valid (unknown, expired or revoked). An error means the
// decision could not be made (store down), not "no".
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// Defaults and limits.
const (
	// DefaultMaxBodyBytes caps the body of single requests (1 MiB).
	DefaultMaxBodyBytes = 1 << 20
	// BatchBodyFactor: the body of POST /v1/events/batch may be this many
	// times MaxBodyBytes (README: "the batch API allows 16×"), unless
	// MaxBatchBodyBytes says otherwise.
	BatchBodyFactor = 16
	// DefaultMaxBatchBodyBytes caps the body of POST /v1/events/batch with
	// the default MaxBodyBytes (16 MiB: up to 1000 events of about 16 KiB
	// each).
	DefaultMaxBatchBodyBytes = BatchBodyFactor * DefaultMaxBodyBytes
	// MaxBatchEvents is the most events one batch call may carry.
	MaxBatchEvents = 1000
	// Routes whose bodies are small by nature have limits of their own
	// (or MaxBodyBytes when lower), so no client can make the node hold a
	// megabyte for them: PortalSessionBodyBytes for the anonymous portal
	// exchange ({"link": …}), SmallBodyBytes for tokens, broadcasts,
	// secret rotations and redrives, PortalBodyBytes for portal links
	// (a theme's logo is up to 64 KiB decoded). Events, subscriptions
	// (headers, metadata, filters), sources (six mapping expressions of up
	// to filter.MaxJMESPathLength each) and filter or subscription tests
	// (a sample event) keep MaxBodyBytes.
	PortalSessionBodyBytes = 4 << 10
	SmallBodyBytes         = 16 << 10
	PortalBodyBytes        = 128 << 10
	// readyTimeout bounds the store ping of /readyz so a hung database
	// fails the probe instead of hanging it.
	readyTimeout = 2 * time.Second
)

// Config configures the API handler. Store, Publisher and Auth are required;
// a zero value anywhere else means its default.
type Config struct {
	Store     store.Store
	Publisher Publisher
	// Notify, when set, wakes this process's delivery workers after a retry
	// or redrive put deliveries back in tier 0 (otherwise they are found at
	// the next poll).
	Notify func()
	// SourcesChanged, when set, is called after a source was created,
	// changed or deleted: this node's source manager reloads at once
	// (other nodes notice within their poll, 2 s).
	SourcesChanged func()
	// Catalog checks published events against the event type catalog's
	// schemas; nil: a Catalog of Store polled every eventtype.DefaultPoll
	// (cmd/herald shares one with the sources).
	Catalog Catalog
	// Tiers are the retry tiers' maturity delays, reported by /v1/stats.
	// Empty reports tier 0 only, with delay 0s.
	Tiers []time.Duration
	// AutoDisable is the server's auto-disable rule (--auto-disable-*),
	// shown in a subscription's health; nil: the defaults.
	AutoDisable *herald.AutoDisable
	Auth        Authenticator
	// Metrics is mounted at GET /metrics when non-nil.
	Metrics http.Handler
	// MetricsToken, when set, is the bearer GET /metrics needs
	// (--metrics-token); without it /metrics is open.
	MetricsToken string
	// Extra routes (e.g. the push endpoints) are mounted as given: the keys
	// are ServeMux patterns. They are not behind the API token.
	Extra map[string]http.Handler
	// Push, when set, serves the Web Push broadcast source under
	// /v1/push/broadcasts (admin token).
	Push PushBroadcaster
	// Listen, when set, serves GET /v1/subscriptions/{id}/listen: the
	// WebSocket `herald listen` holds to receive a listen subscription's
	// deliveries. Without it the route answers not_found.
	Listen Listener
	// WebPush, when set, serves GET /v1/webpush/vapid-public-key (no
	// token): the applicationServerKey of webpush destinations.
	WebPush WebPushKeys
	// History, when set, serves GET /v1/stats/history (this node's last
	// hour, for the dashboard's charts); without it the list is empty.
	History History
	// UserAgent is the User-Agent the sender uses, shown in the requests
	// GET /v1/deliveries/{id} rebuilds for its attempts.
	UserAgent string
	// PublicURL is the base URL (scheme://host[:port]) the links herald
	// hands out point at, e.g. portal links (default: the request's own
	// host over http).
	PublicURL string
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// MaxBodyBytes caps single request bodies (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxBatchBodyBytes caps POST /v1/events/batch bodies (default
	// BatchBodyFactor × MaxBodyBytes, so --max-body-bytes sets both).
	MaxBatchBodyBytes int64
	// SecretGrace is how long a rotated-out secret keeps signing when the
	// rotate call names no grace period (default herald.DefaultSecretGrace).
	SecretGrace time.Duration
	// AllowHTTPPushEndpoints accepts http:// Web Push endpoints in
	// subscriptions (herald serve --dev: a push service on the machine);
	// otherwise they must be https.
	AllowHTTPPushEndpoints bool
	// AllowPrivateURLs is informational only: subscription URLs are not
	// resolved here, because the SSRF guard runs at dial time, after DNS,
	// where a check cannot be raced by a rebinding resolver.
	AllowPrivateURLs bool
}

type server struct {
	cfg   Config
	store store.Store
	pub   Publisher
	// catalog is Config.Catalog or the API's own.
	catalog Catalog
	auth    Authenticator
	now     func() time.Time
	logger  *slog.Logger
	mux     *http.ServeMux
	// patterns are the ServeMux patterns mounted, in order (Patterns).
	patterns []string
	// scopes are the scopes the /v1 patterns declare (RouteScopes).
	scopes map[string]Scope
}

// New returns the API handler. It panics when Store, Publisher or Auth is
// nil: that is a wiring bug, and an API without auth must not start.
func New(cfg Config) http.Handler {
	if cfg.Store == nil || cfg.Publisher == nil || cfg.Auth == nil {
		panic("httpapi: Config.Store, Config.Publisher and Config.Auth are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxBatchBodyBytes <= 0 {
		cfg.MaxBatchBodyBytes = BatchBodyFactor * min(cfg.MaxBodyBytes, math.MaxInt64/BatchBodyFactor)
	}
	if cfg.SecretGrace <= 0 {
		cfg.SecretGrace = herald.DefaultSecretGrace
	}
	if cfg.Catalog == nil {
		cfg.Catalog = eventtype.NewCatalog(cfg.Store, 0, cfg.Logger)
	}
	s := &server{
		cfg:     cfg,
		store:   cfg.Store,
		pub:     cfg.Publisher,
		catalog: cfg.Catalog,
		auth:    cfg.Auth,
		// Milliseconds: the store keeps no more, so answers match what is read back later.
		now:    func() time.Time { return cfg.Now().UTC().Truncate(time.Millisecond) },
		logger: cfg.Logger,
		mux:    http.NewServeMux(),
		scopes: map[string]Scope{},
	}
	s.routes()
	return s
}

func (s *server) routes() {
	s.handle("GET /healthz", http.HandlerFunc(s.healthz))
	s.handle("GET /readyz", http.HandlerFunc(s.readyz))
	if s.cfg.Metrics != nil {
		s.handle("GET /metrics", s.metricsGate(s.cfg.Metrics))
	}
	for pattern, h := range s.cfg.Extra {
		s.handle(pattern, h)
	}

	// Every /v1 route names the scope it needs (ADR 0013, docs/api.md
	// "Scopes"); TestEveryRouteDeclaresAScope and the OpenAPI drift test
	// hold this list against the document's x-herald-scope.
	s.v1("POST /v1/subscriptions", ScopeSubscriptionsWrite, s.subscriptionCreate)
	s.v1("GET /v1/subscriptions", ScopeSubscriptionsRead, s.subscriptionList)
	s.v1("GET /v1/subscriptions/{id}", ScopeSubscriptionsRead, s.subscriptionGet)
	s.v1("PATCH /v1/subscriptions/{id}", ScopeSubscriptionsWrite, s.subscriptionPatch)
	s.v1("DELETE /v1/subscriptions/{id}", ScopeSubscriptionsWrite, s.subscriptionDelete)
	// Secrets are credentials: reading one takes the write scope.
	s.v1("GET /v1/subscriptions/{id}/secret", ScopeSubscriptionsWrite, s.subscriptionSecretGet)
	s.v1("POST /v1/subscriptions/{id}/secret/rotate", ScopeSubscriptionsWrite, s.subscriptionSecretRotate)
	// A test event makes a real request to the endpoint.
	s.v1("POST /v1/subscriptions/{id}/test", ScopeSubscriptionsWrite, s.subscriptionTest)
	// A listener receives the subscription's signed deliveries: as
	// reading its secret does, it takes the write scope.
	s.v1("GET /v1/subscriptions/{id}/listen", ScopeSubscriptionsWrite, s.subscriptionListen)
	// Resend and replay create deliveries, as a retry or redrive does.
	s.v1("POST /v1/subscriptions/{id}/replay", ScopeDeliveriesWrite, s.subscriptionReplay)
	// Compiling a filter against a sample reads and changes nothing.
	s.v1("POST /v1/filters/test", ScopeSubscriptionsRead, s.filterTest)

	s.v1Confirmed("POST /v1/events", ScopeEventsPublish, s.eventPublish)
	s.v1Confirmed("POST /v1/events/batch", ScopeEventsPublish, s.eventPublishBatch)
	s.v1("GET /v1/events", ScopeEventsRead, s.eventList)
	s.v1("GET /v1/events/{id}", ScopeEventsRead, s.eventGet)
	s.v1("POST /v1/events/{id}/resend", ScopeDeliveriesWrite, s.eventResend)

	s.v1("GET /v1/deliveries", ScopeDeliveriesRead, s.deliveryList)
	s.v1("GET /v1/deliveries/{id}", ScopeDeliveriesRead, s.deliveryGet)
	s.v1("POST /v1/deliveries/{id}/retry", ScopeDeliveriesWrite, s.deliveryRetry)
	s.v1("GET /v1/dead-letters", ScopeDeliveriesRead, s.deadLetterGroups)
	s.v1("POST /v1/dead-letters/redrive", ScopeDeliveriesWrite, s.deadLetterRedrive)

	// Per-subscription outcomes are filtered by tenant like deliveries.
	s.v1("GET /v1/stats/subscriptions", ScopeDeliveriesRead, s.subscriptionStats)
	s.v1("GET /v1/stats/tenants", ScopeAdmin, s.tenantStats)
	// Queue-wide figures span every tenant: admin only.
	s.v1("GET /v1/stats", ScopeAdmin, s.statsGet)
	s.v1("GET /v1/stats/history", ScopeAdmin, s.statsHistory)

	// Broker connections are operator-owned (connection.go): admin, and
	// never a tenant-confined token.
	s.v1("POST /v1/connections", ScopeAdmin, s.connectionCreate)
	s.v1("GET /v1/connections", ScopeAdmin, s.connectionList)
	s.v1("GET /v1/connections/{name}", ScopeAdmin, s.connectionGet)
	s.v1("PATCH /v1/connections/{name}", ScopeAdmin, s.connectionPatch)
	s.v1("DELETE /v1/connections/{name}", ScopeAdmin, s.connectionDelete)
	// Broker sources read through those connections and publish events of
	// any tenant (source.go): admin, never a tenant-confined token.
	s.v1("POST /v1/sources", ScopeAdmin, s.sourceCreate)
	s.v1("GET /v1/sources", ScopeAdmin, s.sourceList)
	s.v1("GET /v1/sources/{name}", ScopeAdmin, s.sourceGet)
	s.v1("PATCH /v1/sources/{name}", ScopeAdmin, s.sourcePatch)
	s.v1("DELETE /v1/sources/{name}", ScopeAdmin, s.sourceDelete)

	// The event type catalog is shared by every tenant: writes are the
	// operator's (admin, unconfined), reads any token's, since forms and
	// the portal offer its types (eventtype.go).
	s.v1("POST /v1/event-types", ScopeAdmin, s.eventTypeCreate)
	s.v1AnyToken("GET /v1/event-types", s.eventTypeList)
	s.v1AnyToken("GET /v1/event-types/{name}", s.eventTypeGet)
	s.v1("PATCH /v1/event-types/{name}", ScopeAdmin, s.eventTypePatch)
	s.v1("DELETE /v1/event-types/{name}", ScopeAdmin, s.eventTypeDelete)

	s.v1("POST /v1/tokens", ScopeAdmin, s.tokenCreate)
	s.v1("GET /v1/tokens", ScopeAdmin, s.tokenList)
	s.v1("DELETE /v1/tokens/{id}", ScopeAdmin, s.tokenDelete)

	// The consumer portal (ADR 0015): admin makes a link; the link, not a
	// bearer token, is the credential of the exchange.
	s.v1("POST /v1/tenants/{tenant}/portal", ScopeAdmin, s.portalCreate)
	s.v1Link("POST /v1/portal/sessions", s.portalSession)
	// "End session": the session's token revokes itself.
	s.v1Self("DELETE /v1/portal/sessions/current", s.portalSessionEnd)
	// A portal tab continuing the browser's session reads its theme.
	s.v1Self("GET /v1/portal/sessions/current", s.portalSessionCurrent)
	// The calling token describes itself (the dashboard's sign-in).
	s.v1AnyToken("GET /v1/whoami", s.whoami)

	if s.cfg.Push != nil {
		s.v1("PUT /v1/push/broadcasts/{id...}", ScopeAdmin, s.pushBroadcastPut)
		s.v1("GET /v1/push/broadcasts", ScopeAdmin, s.pushBroadcastList)
	}
	if s.cfg.WebPush != nil {
		s.v1Public("GET /v1/webpush/vapid-public-key", s.webPushKey)
	}
}

// handlerFunc is an API handler: it writes its success answer itself and
// returns any error for writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle mounts h and records pattern for Patterns.
func (s *server) handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	s.patterns = append(s.patterns, pattern)
}

// Patterns lists the ServeMux patterns h (a handler New returned) serves,
// Extra routes included, so a test can hold them against the OpenAPI
// document. It returns nil for any other handler.
func Patterns(h http.Handler) []string {
	s, ok := h.(*server)
	if !ok {
		return nil
	}
	return slices.Clone(s.patterns)
}

// RouteScopes maps each /v1 pattern h (a handler New returned) serves to
// the scope it declares, so a test can hold them against the OpenAPI
// document. It returns nil for any other handler.
func RouteScopes(h http.Handler) map[string]Scope {
	s, ok := h.(*server)
	if !ok {
		return nil
	}
	return maps.Clone(s.scopes)
}

// v1 mounts an authenticated API route that needs scope. An empty scope
// panics: every route must say what it needs (a wiring bug otherwise).
func (s *server) v1(pattern string, scope Scope, h handlerFunc) {
	if !ValidScope(string(scope)) {
		panic("httpapi: route " + pattern + " declares no valid scope")
	}
	s.scopes[pattern] = scope
	s.handle(pattern, s.authenticated(scope, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}))
}

// v1Confirmed mounts a /v1 route whose write confirms the caller's token
// in its own transaction (publishing; ADR 0035): the token may come from
// the node's cache (authenticatedAs), and a request that ends without that
// write — an error, or nothing to store — reads the token first
// (confirmToken), so a revoked token gets 401 and nothing else.
func (s *server) v1Confirmed(pattern string, scope Scope, h handlerFunc) {
	if !ValidScope(string(scope)) {
		panic("httpapi: route " + pattern + " declares no valid scope")
	}
	s.scopes[pattern] = scope
	s.handle(pattern, s.authenticatedAs(scope, true, func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, s.confirmToken(r, err))
		}
	}))
}

// v1Link mounts a /v1 route that takes no bearer token because its body
// carries its own credential (a portal link); it declares ScopePortalLink.
func (s *server) v1Link(pattern string, h handlerFunc) {
	s.scopes[pattern] = ScopePortalLink
	s.handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}))
}

// v1Self mounts a /v1 route any valid token reaches whatever its scopes,
// because it acts on that token alone (the handler decides which tokens
// qualify); it declares ScopePortalSession.
func (s *server) v1Self(pattern string, h handlerFunc) {
	s.scopes[pattern] = ScopePortalSession
	s.handle(pattern, s.authenticated("", func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}))
}

// ServeHTTP routes r. Requests no pattern matches get a JSON 404 or 405
// instead of ServeMux's plain-text ones; under /v1/ only after auth, so an
// anonymous caller cannot probe which routes exist.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	unmatched := func(w http.ResponseWriter, r *http.Request) {
		if allow := s.allowedMethods(r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			s.writeError(w, r, herald.Errorf(codeMethodNotAllowed, "method %s not allowed on %s; allowed: %s",
				r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		s.writeError(w, r, herald.NotFoundf("no route %s %s", r.Method, r.URL.Path))
	}
	if r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/") {
		// Any valid token learns that a route does not exist.
		s.authenticated("", unmatched).ServeHTTP(w, r)
		return
	}
	unmatched(w, r)
}

// allowedMethods lists the methods some route serves r's path with.
func (s *server) allowedMethods(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := *r
		probe.Method = m
		if _, pattern := s.mux.Handler(&probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	return allow
}

func (s *server) notify() {
	if s.cfg.Notify != nil {
		s.cfg.Notify()
	}
}

// NotFound answers a request for a route that exists but is served on
// another listener (herald serve --push-listen, --admin-listen) with the
// API's JSON 404, exactly as for a route that does not exist.
func NotFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, errorBody{Error: errorJSON{Code: herald.CodeNotFound,
		Message: "no route " + r.Method + " " + quote(r.URL.Path) + " on this listener"}}, slog.Default())
}
