package mqttdest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/webhook"
)

// Client settings (see the package comment).
const (
	keepAlive      = 30 // seconds
	connectTimeout = 5 * time.Second
	backoffMin     = 250 * time.Millisecond
	backoffMax     = 10 * time.Second
	closeTimeout   = 2 * time.Second
	// idleClose disconnects a client no attempt used for this long
	// (destination.PoolConfig.IdleClose): longer than any attempt
	// (herald.MaxTimeout).
	idleClose = 10 * time.Minute
	// maxMessageLen bounds Result.Message, as for webhooks.
	maxMessageLen = 256
)

// Config configures a Publisher.
type Config struct {
	// Connections resolves the connection a destination names.
	Connections destination.Connections
	// Logger receives connection changes (down, up again, replaced); nil
	// discards.
	Logger *slog.Logger
	// NodeID names this node in client ids ("herald-<node>-<connection>");
	// default: the host name and a random suffix.
	NodeID string
}

// Publisher publishes one QoS 1 message per attempt. It implements
// destination.Publisher and is safe for concurrent use.
type Publisher struct {
	conns  destination.Connections
	logger *slog.Logger
	node   string
	// pool holds the client of each connection (by name). autopaho
	// connects and reconnects by itself (with its own backoff), so the
	// pool's dial only starts it and a client is never redialled for
	// being down: the pool replaces it on new settings and retires it
	// when idle.
	pool *destination.Pool[*client]
}

// client is the connection manager of one connection and the state of its
// connection.
type client struct {
	cm     *autopaho.ConnectionManager
	cancel context.CancelFunc
	// ready is closed at the first connection result, up or failed: until
	// then an attempt waits (within its timeout) instead of failing.
	ready     chan struct{}
	readyOnce sync.Once

	mu        sync.Mutex
	lastErr   string            // why the connection is down; "" while up
	lastClass herald.ErrorClass // its class (tls, dns, broker for a refused CONNECT, ...)
	// lost is closed when the current network connection goes down, so
	// the attempts waiting for their PUBACK on it end at once (the session
	// does not outlive the connection: no PUBACK can come for them).
	lost chan struct{}
}

// New returns a Publisher resolving connections through cfg.Connections.
func New(cfg Config) *Publisher {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	node := cfg.NodeID
	if node == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		node = host + "-" + hex.EncodeToString(b[:])
	}
	p := &Publisher{conns: cfg.Connections, logger: logger, node: node}
	p.pool = destination.NewPool(destination.PoolConfig[*client]{
		Kind:   "mqtt",
		Logger: logger,
		Dial:   p.start,
		DialFailure: func(name string, err error) webhook.Result {
			return webhook.Result{Class: herald.ErrorConnectionUnset, Message: fmt.Sprintf("connection %q: %s", name, err)}
		},
		// A replaced or idle client stops reconnecting at once; attempts
		// in flight on it fail as connection errors and are retried on the
		// new one, which takes over the same client id.
		Retire:        func(c *client) { c.cancel(); c.close() },
		Shut:          (*client).close,
		IdleClose:     idleClose,
		ClosedMessage: "mqtt publisher closed",
	})
	return p
}

// ClientID is the MQTT client id this node uses for connection name.
func (p *Publisher) ClientID(name string) string { return "herald-" + p.node + "-" + name }

// Close disconnects every client (waiting up to 2 s each). Sends after
// Close fail as connection errors.
func (p *Publisher) Close() { p.pool.Close() }

// DefaultTopic is the topic an event type publishes to when the
// destination names none: "." becomes "/", "+" and "#" become "_", and a
// leading "$" (topics the broker reserves) becomes "_".
func DefaultTopic(eventType string) string {
	t := strings.NewReplacer(".", "/", "+", "_", "#", "_").Replace(eventType)
	if strings.HasPrefix(t, "$") {
		t = "_" + t[1:]
	}
	return t
}

// ValidTopic reports why topic cannot be published to, or nil: the API's
// rule (herald.CheckMQTTTopic) applied again at send time — not empty, at
// most herald.MaxBrokerNameBytes, no wildcard ("+", "#"), no leading "$",
// UTF-8 without control characters (NUL included).
func ValidTopic(topic string) error {
	if err := herald.CheckMQTTTopic(topic); err != nil {
		return fmt.Errorf("MQTT topic %q %w", herald.CleanLine(topic, 64), err)
	}
	return nil
}

// errAttemptTimeout is the cause of the per-attempt context, to tell our own
// timeout from the caller's deadline or cancellation.
var errAttemptTimeout = errors.New("attempt timeout")

// errConnectionLost ends a publish whose connection went down.
var errConnectionLost = errors.New("connection lost")

// Send implements destination.Publisher: one PUBLISH at QoS 1, PUBACK
// awaited.
func (p *Publisher) Send(ctx context.Context, r *webhook.Request) webhook.Result {
	start := time.Now()
	res := p.send(ctx, r)
	res.Duration = time.Since(start)
	res.Message = herald.CleanLine(res.Message, maxMessageLen)
	return res
}

func (p *Publisher) send(ctx context.Context, r *webhook.Request) (sent webhook.Result) {
	d := r.Destination
	topic := d.Topic
	if topic == "" {
		topic = DefaultTopic(r.EventType)
	}
	if err := ValidTopic(topic); err != nil {
		return webhook.Result{Class: herald.ErrorInvalidRequest, Message: err.Error()}
	}
	msg, fail := destination.NewMessage(r)
	if fail != nil {
		return *fail
	}
	defer func() { sent.RequestHeaders = msg.RecordedHeaders() }()
	conn, fail := destination.Resolve(ctx, p.conns, d, r.Tenant)
	if fail != nil {
		return *fail
	}
	c, fail := p.pool.Get(ctx, conn)
	if fail != nil {
		return *fail
	}

	timeout := destination.Timeout(r)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	defer cancel()

	select {
	case <-c.ready:
	case <-ctx.Done():
		cls, m := ctxResult(ctx, timeout, "no connection to the MQTT broker")
		return webhook.Result{Class: cls, Message: m}
	}

	names := make([]string, 0, len(msg.Headers))
	for k := range msg.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	props := &paho.PublishProperties{ContentType: destination.ContentType}
	for _, k := range names {
		props.User.Add(k, msg.Headers[k])
	}
	c.mu.Lock()
	lost := c.lost
	c.mu.Unlock()
	pubCtx, cancelPub := context.WithCancelCause(ctx)
	defer cancelPub(nil)
	go func() {
		select {
		case <-lost:
			cancelPub(errConnectionLost)
		case <-pubCtx.Done():
		}
	}()
	resp, err := c.cm.Publish(pubCtx, &paho.Publish{
		QoS: 1, Retain: d.Retain, Topic: topic, Payload: msg.Body, Properties: props,
	})
	if resp != nil && resp.ReasonCode >= 0x80 {
		m := fmt.Sprintf("PUBACK reason 0x%02x", resp.ReasonCode)
		if err != nil {
			m += ": " + strings.TrimPrefix(err.Error(), "error publishing: ")
		}
		if resp.Properties != nil && resp.Properties.ReasonString != "" {
			m += " (" + resp.Properties.ReasonString + ")"
		}
		return webhook.Result{Class: herald.ErrorBroker, Message: m}
	}
	if err != nil {
		if errors.Is(context.Cause(pubCtx), errConnectionLost) && ctx.Err() == nil {
			// The broker may have taken it: the retry may duplicate it.
			return webhook.Result{Class: herald.ErrorConnection, Message: "connection to the MQTT broker lost before the PUBACK"}
		}
		cls, m := c.classify(ctx, err, timeout)
		return webhook.Result{Class: cls, Message: m}
	}
	res := webhook.Result{Success: true}
	if resp != nil && resp.ReasonCode == 0x10 {
		res.Excerpt = "PUBACK 0x10: no matching subscribers"
	}
	return res
}

// start builds and starts the connection manager of conn.
func (p *Publisher) start(conn *herald.Connection) (*client, error) {
	u, err := url.Parse(conn.URL)
	if err != nil {
		// url's errors quote the URL, which may hold a password.
		return nil, errors.New("bad MQTT URL")
	}
	var secure bool
	switch u.Scheme {
	case "mqtt", "tcp":
	case "mqtts", "ssl", "tls":
		secure = true
	case "ws":
	case "wss":
		secure = true
	default:
		return nil, fmt.Errorf("MQTT URL scheme %q is not one of mqtt, mqtts, tcp, ssl, tls, ws, wss", u.Scheme)
	}
	if u.Port() == "" && (u.Scheme != "ws" && u.Scheme != "wss") {
		port := "1883"
		if secure {
			port = "8883"
		}
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	server := *u
	server.User = nil

	var tlsCfg *tls.Config
	if secure || conn.TLS != nil {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
		if conn.TLS != nil {
			if err := destination.ApplyTLS(tlsCfg, conn.TLS); err != nil {
				return nil, err
			}
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	c := &client{cancel: cancel, ready: make(chan struct{}), lost: make(chan struct{})}
	name := conn.Name
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{&server},
		TlsCfg:                        tlsCfg,
		KeepAlive:                     keepAlive,
		CleanStartOnInitialConnection: true,
		SessionExpiryInterval:         0,
		ReconnectBackoff:              autopaho.NewExponentialBackoff(backoffMin, backoffMax, 2*backoffMin, 2),
		ConnectTimeout:                connectTimeout,
		OnConnectionUp: func(*autopaho.ConnectionManager, *paho.Connack) {
			c.mu.Lock()
			was := c.lastErr
			c.lastErr = ""
			select {
			case <-c.lost: // the previous connection's: a fresh one
				c.lost = make(chan struct{})
			default:
			}
			c.mu.Unlock()
			c.readyOnce.Do(func() { close(c.ready) })
			if was != "" {
				p.logger.Info("mqtt connection up again", "connection", name)
			}
		},
		OnConnectionDown: func() bool {
			c.setDown("connection lost", herald.ErrorConnection)
			c.mu.Lock()
			select {
			case <-c.lost:
			default:
				close(c.lost)
			}
			c.mu.Unlock()
			p.logger.Warn("mqtt connection lost; reconnecting", "connection", name)
			return true
		},
		OnConnectError: func(err error) {
			if c.setDown(err.Error(), connectClass(err)) {
				p.logger.Warn("mqtt connect failed; retrying with backoff", "connection", name, "error", herald.CleanLine(err.Error(), maxMessageLen))
			}
			c.readyOnce.Do(func() { close(c.ready) })
		},
		ClientConfig: paho.ClientConfig{
			ClientID: p.ClientID(name),
			// The attempt's own timeout bounds every publish.
			PacketTimeout: herald.MaxTimeout,
			OnServerDisconnect: func(d *paho.Disconnect) {
				m := fmt.Sprintf("broker disconnected: reason 0x%02x", d.ReasonCode)
				if d.Properties != nil && d.Properties.ReasonString != "" {
					m += " (" + d.Properties.ReasonString + ")"
				}
				c.setDown(m, herald.ErrorConnection)
			},
		},
	}
	if u.User != nil {
		cfg.ConnectUsername = u.User.Username()
		pw, _ := u.User.Password()
		cfg.ConnectPassword = []byte(pw)
	}
	cm, err := autopaho.NewConnection(ctx, cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	c.cm = cm
	return c, nil
}

// setDown records why the connection is down; it reports whether it was up
// (or never tried), so a failure is logged once, not per retry.
func (c *client) setDown(why string, class herald.ErrorClass) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := c.lastErr == ""
	c.lastErr = why
	c.lastClass = class
	return first
}

// down says why the connection is down, and its class.
func (c *client) down() (string, herald.ErrorClass) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastErr == "" {
		return "not connected", herald.ErrorConnection
	}
	return c.lastErr, c.lastClass
}

// connectClass classifies a failed connection attempt: a CONNACK refusal
// (bad credentials, client id refused, ...) is the broker's, TLS and DNS
// failures are their own classes, the rest (refused, reset, timed out
// dialling) is connection.
func connectClass(err error) herald.ErrorClass {
	var cerr *autopaho.ConnackError
	var dnsErr *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &cerr):
		return herald.ErrorBroker
	case errors.As(err, &dnsErr):
		return herald.ErrorDNS
	case webhook.IsTLSError(err):
		return herald.ErrorTLS
	case errors.As(err, &ne) && ne.Timeout():
		return herald.ErrorTimeout
	}
	return herald.ErrorConnection
}

// close disconnects, waiting up to closeTimeout.
func (c *client) close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = c.cm.Disconnect(ctx)
	c.cancel()
}

// classify maps a Publish error (other than a PUBACK refusal) to a failure
// class and a one-line message.
func (c *client) classify(ctx context.Context, err error, timeout time.Duration) (herald.ErrorClass, string) {
	if errors.Is(err, autopaho.ConnectionDownError) {
		why, class := c.down()
		return class, "MQTT broker connection is down: " + why
	}
	if ctx.Err() != nil {
		return ctxResult(ctx, timeout, "no PUBACK")
	}
	return herald.ErrorConnection, "mqtt: " + err.Error()
}

// ctxResult classifies an attempt whose context ended while waiting for
// what.
func ctxResult(ctx context.Context, timeout time.Duration, what string) (herald.ErrorClass, string) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errAttemptTimeout):
		return herald.ErrorTimeout, what + " within " + timeout.String()
	case errors.Is(cause, context.DeadlineExceeded):
		return herald.ErrorTimeout, what + " before the caller's deadline"
	default:
		return herald.ErrorConnection, "attempt cancelled"
	}
}
