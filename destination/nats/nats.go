package natsdest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
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
	// DefaultBackoffMin and DefaultBackoffMax bound the wait before the
	// next dial after a failed one (doubling per consecutive failure).
	DefaultBackoffMin = 200 * time.Millisecond
	DefaultBackoffMax = 10 * time.Second
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
	cfg Config

	mu      sync.Mutex
	clients map[string]*client // by connection name
	closed  bool
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
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(DefaultBackoffMax, cfg.BackoffMin)
	}
	return &Publisher{cfg: cfg, clients: map[string]*client{}}
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

func (p *Publisher) send(ctx context.Context, r *webhook.Request) webhook.Result {
	d := r.Destination
	conn, fail := destination.Resolve(ctx, p.cfg.Connections, d, r.Tenant)
	if fail != nil {
		return *fail
	}
	msg, fail := destination.NewMessage(r)
	if fail != nil {
		return *fail
	}
	subject := d.Subject
	if subject == "" {
		subject = Subject(r.EventType)
	}
	if !validSubject(subject) {
		return webhook.Result{Class: herald.ErrorInvalidRequest,
			Message: herald.CleanLine(fmt.Sprintf("subject %q is not a valid NATS publish subject", subject), 256)}
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = herald.DefaultTimeout
	}
	timeout = min(timeout, herald.MaxTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cl, err := p.client(conn.Name)
	if err != nil {
		return webhook.Result{Class: herald.ErrorConnection, Message: err.Error()}
	}
	js, fail := cl.session(ctx, conn)
	if fail != nil {
		return *fail
	}
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

func (p *Publisher) client(name string) (*client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	c := p.clients[name]
	if c == nil {
		c = &client{p: p, name: name}
		p.clients[name] = c
	}
	return c, nil
}

// Close closes every connection; later Sends fail.
func (p *Publisher) Close() {
	p.mu.Lock()
	p.closed = true
	clients := p.clients
	p.clients = map[string]*client{}
	p.mu.Unlock()
	for _, c := range clients {
		c.close()
	}
}

// client is one herald connection's NATS connection on this node.
type client struct {
	p    *Publisher
	name string

	mu       sync.Mutex
	sess     *session
	dial     *dialCall // the dial in progress, nil when none
	closed   bool
	failures int       // consecutive failed dials
	retryAt  time.Time // no dial before (backoff)
	lastKey  string    // what the last failed dial dialled
	lastErr  webhook.Result
}

type session struct {
	key string
	nc  *nats.Conn
	js  jetstream.JetStream
}

type dialCall struct {
	key  string
	done chan struct{}
	sess *session
	fail *webhook.Result
}

// session returns the JetStream context of conn's connection, dialling
// when there is none, it closed for good or conn's URL/TLS changed. It
// waits for a dial at most until ctx ends.
func (c *client) session(ctx context.Context, conn *herald.Connection) (jetstream.JetStream, *webhook.Result) {
	key := connKey(conn)
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, &webhook.Result{Class: herald.ErrorConnection, Message: errClosed.Error()}
		}
		if s := c.sess; s != nil {
			if s.key == key && !s.nc.IsClosed() {
				c.mu.Unlock()
				return s.js, nil
			}
			c.sess = nil
			if s.key != key {
				c.p.cfg.Logger.Info("nats connection settings changed: reconnecting", "connection", c.name)
			}
			// Drain lets publishes waiting for their PubAck finish.
			go func() { _ = s.nc.Drain() }()
		}
		d := c.dial
		if d == nil {
			if key == c.lastKey && time.Now().Before(c.retryAt) {
				res := c.lastErr
				c.mu.Unlock()
				res.Message = herald.CleanLine(res.Message+" (next dial after backoff)", 256)
				return nil, &res
			}
			d = &dialCall{key: key, done: make(chan struct{})}
			c.dial = d
			go c.runDial(d, conn)
		}
		c.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return nil, &webhook.Result{Class: herald.ErrorTimeout,
				Message: fmt.Sprintf("could not connect to connection %q within the timeout", c.name)}
		}
		if d.key != key {
			continue // a dial of older settings finished: look again
		}
		if d.fail != nil {
			res := *d.fail
			return nil, &res
		}
		if !d.sess.nc.IsClosed() {
			return d.sess.js, nil
		}
	}
}

// runDial dials without holding c.mu.
func (c *client) runDial(d *dialCall, conn *herald.Connection) {
	s, err := c.connect(conn, d.key)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(d.done)
	c.dial = nil
	if err != nil {
		res := dialFailure(c.name, err)
		d.fail = &res
		c.failures++
		backoff := min(c.p.cfg.BackoffMin<<min(c.failures-1, 16), c.p.cfg.BackoffMax)
		c.retryAt = time.Now().Add(backoff)
		c.lastKey, c.lastErr = d.key, res
		c.p.cfg.Logger.Warn("nats dial failed", "connection", c.name, "error", res.Message,
			"failures", c.failures, "retry_after", backoff)
		return
	}
	d.sess = s
	if c.closed {
		s.nc.Close()
		return
	}
	if c.failures > 0 {
		c.p.cfg.Logger.Info("nats connected again", "connection", c.name, "after_failures", c.failures)
	}
	c.failures, c.lastKey = 0, ""
	if old := c.sess; old != nil {
		go func() { _ = old.nc.Drain() }()
	}
	c.sess = s
}

func (c *client) connect(conn *herald.Connection, key string) (*session, error) {
	logger := c.p.cfg.Logger
	opts := []nats.Option{
		nats.Name("herald " + conn.Name),
		nats.Timeout(c.p.cfg.DialTimeout),
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
		tc, err := tlsConfig(conn.TLS)
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
	return &session{key: key, nc: nc, js: js}, nil
}

func (c *client) close() {
	c.mu.Lock()
	c.closed = true
	s := c.sess
	c.sess = nil
	c.mu.Unlock()
	if s != nil {
		s.nc.Close()
	}
}

// connKey is what a session was dialled with: a change redials.
func connKey(c *herald.Connection) string {
	if c.TLS == nil {
		return c.URL
	}
	t := c.TLS
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%t", c.URL, t.CAFile, t.CertFile, t.KeyFile, t.ServerName, t.InsecureSkipVerify)
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
	case isTLS(err):
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

func isTLS(err error) bool {
	var (
		rh  tls.RecordHeaderError
		ae  *tls.AlertError
		ve  *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		hn  x509.HostnameError
		cie x509.CertificateInvalidError
	)
	return errors.As(err, &rh) || errors.As(err, &ae) || errors.As(err, &ve) ||
		errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &cie)
}

// tlsConfig builds the client TLS of a connection.
func tlsConfig(t *herald.ConnectionTLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // G402: an admin's explicit per-connection choice, documented as tests only
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca_file %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
