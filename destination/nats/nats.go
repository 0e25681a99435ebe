package natsdest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/webhook"
)

// Defaults of Config.
const (
	// DefaultDialTimeout bounds a dial (TCP connect and the NATS handshake).
	DefaultDialTimeout = 5 * time.Second
	// DefaultBackoffMin and DefaultBackoffMax are the pool's
	// (destination.DefaultBackoffMin, destination.DefaultBackoffMax).
	DefaultBackoffMin = destination.DefaultBackoffMin
	DefaultBackoffMax = destination.DefaultBackoffMax
	// reconnectWait is the client's own pause between reconnect attempts
	// of a dialled connection.
	reconnectWait = 500 * time.Millisecond
)

// Config configures a Publisher.
type Config struct {
	// Connections resolves the connection a destination names (required).
	Connections destination.Connections
	// Logger receives dial failures, disconnections and reconnections
	// (default: discard).
	Logger *slog.Logger
	// DialTimeout (default DefaultDialTimeout).
	DialTimeout time.Duration
	// BackoffMin and BackoffMax (defaults DefaultBackoffMin,
	// DefaultBackoffMax).
	BackoffMin, BackoffMax time.Duration
}

// Publisher publishes attempts to NATS JetStream; it implements
// destination.Publisher. Make one per process.
type Publisher struct {
	cfg  Config
	pool *destination.Pool[*session] // by connection name
}

// New returns a Publisher; it dials nothing until the first Send.
func New(cfg Config) *Publisher {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	return &Publisher{cfg: cfg, pool: destination.NewPool(destination.PoolConfig[*session]{
		Kind:        "nats",
		Logger:      cfg.Logger,
		Dial:        func(conn *herald.Connection) (*session, error) { return connect(conn, cfg) },
		DialFailure: dialFailure,
		// Closed for good; the client reconnects by itself otherwise.
		Alive: func(s *session) bool { return !s.nc.IsClosed() },
		// Drain lets publishes waiting for their PubAck finish.
		Retire:        func(s *session) { _ = s.nc.Drain() },
		Shut:          func(s *session) { s.nc.Close() },
		BackoffMin:    cfg.BackoffMin,
		BackoffMax:    cfg.BackoffMax,
		ClosedMessage: errClosed.Error(),
	})}
}

var errClosed = errors.New("the NATS publisher is closed (node shutting down)")

// Subject is the default subject of an event type (see the package doc):
// its dot-separated tokens with "*", ">", whitespace and control
// characters replaced by "_", and empty tokens made "_".
func Subject(eventType string) string {
	tokens := strings.Split(eventType, ".")
	for i, tok := range tokens {
		if tok == "" {
			tokens[i] = "_"
			continue
		}
		tokens[i] = strings.Map(func(r rune) rune {
			if r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) {
				return '_'
			}
			return r
		}, tok)
	}
	return strings.Join(tokens, ".")
}

// validSubject reports whether s is a subject one may publish to: non-empty
// dot-separated tokens, none a wildcard ("*", ">" as a whole token), no
// whitespace or control characters (the API's check of a configured
// subject).
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsFunc(tok, func(r rune) bool {
			return unicode.IsSpace(r) || unicode.IsControl(r)
		}) {
			return false
		}
	}
	return true
}

// Send publishes one attempt and waits for the stream's PubAck.
func (p *Publisher) Send(ctx context.Context, r *webhook.Request) webhook.Result {
	start := time.Now()
	res := p.send(ctx, r)
	res.Duration = time.Since(start)
	return res
}

func (p *Publisher) send(ctx context.Context, r *webhook.Request) (sent webhook.Result) {
	d := r.Destination
	conn, fail := destination.Resolve(ctx, p.cfg.Connections, d, r.Tenant)
	if fail != nil {
		return *fail
	}
	msg, fail := destination.NewMessage(r)
	if fail != nil {
		return *fail
	}
	defer func() { sent.RequestHeaders = msg.RecordedHeaders() }()
	subject := d.Subject
	if subject == "" {
		subject = Subject(r.EventType)
	}
	if !validSubject(subject) {
		return webhook.Result{Class: herald.ErrorInvalidRequest,
			Message: herald.CleanLine(fmt.Sprintf("subject %q is not a valid NATS publish subject", subject), 256)}
	}
	timeout := destination.Timeout(r)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	sess, fail := p.pool.Get(ctx, conn)
	if fail != nil {
		return *fail
	}
	js := sess.js
	nm := nats.NewMsg(subject)
	for k, v := range msg.Headers {
		nm.Header.Set(k, v)
	}
	nm.Header.Set("Content-Type", destination.ContentType)
	nm.Data = msg.Body
	ack, err := js.PublishMsg(ctx, nm, jetstream.WithMsgID(msg.ID), jetstream.WithRetryAttempts(0))
	if err != nil {
		return failure(ctx, err, timeout, subject)
	}
	_ = ack // ack.Duplicate: stored by an earlier attempt; delivered all the same
	return webhook.Result{Success: true}
}

// failure classifies a failed publish.
func failure(ctx context.Context, err error, timeout time.Duration, subject string) webhook.Result {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return webhook.Result{Class: herald.ErrorNoStream,
			Message: herald.CleanLine(fmt.Sprintf("no JetStream stream answered for subject %q", subject), 256)}
	case errors.As(err, &apiErr):
		return webhook.Result{Class: herald.ErrorBroker,
			Message: herald.CleanLine(fmt.Sprintf("the stream refused the message: %s (%d)", apiErr.Description, apiErr.ErrorCode), 256)}
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return webhook.Result{Class: herald.ErrorTimeout, Message: fmt.Sprintf("no PubAck within %s", timeout)}
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrConnectionDraining):
		return webhook.Result{Class: herald.ErrorConnection, Message: "not connected to the NATS server (reconnecting)"}
	case errors.Is(err, nats.ErrMaxPayload):
		return webhook.Result{Class: herald.ErrorPayloadTooLarge, Permanent: true,
			Message: "the message exceeds the server's max_payload"}
	}
	return webhook.Result{Class: herald.ErrorBroker, Message: herald.CleanLine(err.Error(), 256)}
}

// Close closes every connection; later Sends fail.
func (p *Publisher) Close() { p.pool.Close() }

// session is one NATS connection and its JetStream context.
type session struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// connect dials conn and opens its JetStream context.
func connect(conn *herald.Connection, cfg Config) (*session, error) {
	logger := cfg.Logger
	opts := []nats.Option{
		nats.Name("herald " + conn.Name),
		nats.Timeout(cfg.DialTimeout),
		// Once connected, the client reconnects by itself, forever, and
		// does not buffer publishes meanwhile: attempts fail at once as
		// connection and the tiers retry them.
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("nats disconnected", "connection", conn.Name, "error", herald.CleanLine(err.Error(), 160))
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { logger.Info("nats reconnected", "connection", conn.Name) }),
	}
	if conn.TLS != nil {
		tc, err := destination.TLSConfig(conn.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(tc))
	}
	nc, err := nats.Connect(conn.URL, opts...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &session{nc: nc, js: js}, nil
}

// dialFailure classifies a failed dial; the message never holds the URL
// (it may carry a password or token).
func dialFailure(name string, err error) webhook.Result {
	var (
		ne net.Error
		oe *net.OpError
	)
	switch {
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, nats.ErrTimeout):
		return webhook.Result{Class: herald.ErrorTimeout, Message: fmt.Sprintf("connection %q: dial timed out", name)}
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired):
		return webhook.Result{Class: herald.ErrorConnection,
			Message: fmt.Sprintf("connection %q: the server refused the credentials", name)}
	case webhook.IsTLSError(err):
		return webhook.Result{Class: herald.ErrorTLS,
			Message: herald.CleanLine(fmt.Sprintf("connection %q: tls: %s", name, err.Error()), 256)}
	case errors.As(err, &oe) && oe.Err != nil:
		return webhook.Result{Class: herald.ErrorConnection,
			Message: herald.CleanLine(fmt.Sprintf("connection %q: %s: %s", name, oe.Op, oe.Err.Error()), 256)}
	case errors.Is(err, nats.ErrNoServers):
		return webhook.Result{Class: herald.ErrorConnection,
			Message: fmt.Sprintf("connection %q: no server answered", name)}
	}
	msg := err.Error()
	if strings.Contains(msg, "://") {
		msg = "dial failed" // URL parse errors quote the URL
	}
	return webhook.Result{Class: herald.ErrorConnection,
		Message: herald.CleanLine(fmt.Sprintf("connection %q: %s", name, msg), 256)}
}
