package amqpdest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/webhook"
)

// Defaults of Config.
const (
	// DefaultDialTimeout bounds a dial: TCP connect, TLS and AMQP handshake.
	DefaultDialTimeout = 5 * time.Second
	// DefaultIdleChannels is how many idle confirm-mode channels a
	// connection keeps for the next publishes; more are opened while more
	// publishes run at once, and closed when they end.
	DefaultIdleChannels = 64
	// DefaultBackoffMin and DefaultBackoffMax are the pool's
	// (destination.DefaultBackoffMin, destination.DefaultBackoffMax).
	DefaultBackoffMin = destination.DefaultBackoffMin
	DefaultBackoffMax = destination.DefaultBackoffMax
)

// Config configures a Publisher.
type Config struct {
	// Connections resolves the connection a destination names (required).
	Connections destination.Connections
	// Logger receives dial failures and reconnections (default: discard).
	Logger *slog.Logger
	// DialTimeout (default DefaultDialTimeout).
	DialTimeout time.Duration
	// IdleChannels (default DefaultIdleChannels).
	IdleChannels int
	// BackoffMin and BackoffMax (defaults DefaultBackoffMin,
	// DefaultBackoffMax).
	BackoffMin, BackoffMax time.Duration
}

// Publisher publishes attempts to RabbitMQ; it implements
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
	if cfg.IdleChannels <= 0 {
		cfg.IdleChannels = DefaultIdleChannels
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	p := &Publisher{cfg: cfg}
	p.pool = destination.NewPool(destination.PoolConfig[*session]{
		Kind:   "amqp",
		Logger: cfg.Logger,
		Dial: func(conn *herald.Connection) (*session, error) {
			ac, err := dial(conn, cfg.DialTimeout)
			if err != nil {
				return nil, err
			}
			return &session{conn: ac, idleMax: cfg.IdleChannels}, nil
		},
		DialFailure:   dialFailure,
		Alive:         func(s *session) bool { return !s.conn.IsClosed() },
		Retire:        (*session).retire,
		BackoffMin:    cfg.BackoffMin,
		BackoffMax:    cfg.BackoffMax,
		ClosedMessage: errClosed.Error(),
	})
	return p
}

var errClosed = errors.New("the AMQP publisher is closed (node shutting down)")

// Send publishes one attempt and waits for the broker's confirm.
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
	key := d.RoutingKey
	if key == "" {
		key = r.EventType
	}
	if len(key) > 255 {
		return webhook.Result{Class: herald.ErrorInvalidRequest,
			Message: fmt.Sprintf("routing key is %d bytes; AMQP allows at most 255 (set destination.routing_key)", len(key))}
	}
	timeout := destination.Timeout(r)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	s, fail := p.pool.Get(ctx, conn)
	if fail != nil {
		return *fail
	}
	pc, err := s.take(ctx)
	if err != nil {
		return failure(ctx, s.conn, err, timeout, "opening a channel")
	}
	headers := make(amqp.Table, len(msg.Headers))
	for k, v := range msg.Headers {
		headers[k] = v
	}
	pub := amqp.Publishing{
		Headers:      headers,
		ContentType:  destination.ContentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    messageID(r),
		Timestamp:    r.Timestamp,
		Type:         r.EventType,
		AppId:        "herald",
		Body:         msg.Body,
	}
	dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, d.Exchange, key, true, false, pub)
	if err != nil {
		s.put(pc, false)
		return failure(ctx, s.conn, pc.closeError(err), timeout, "publishing")
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		// The confirm may still come; the channel's state is unknown, so
		// it is not reused.
		s.put(pc, false)
		return failure(ctx, s.conn, err, timeout, "awaiting the confirm")
	}
	if !ok {
		// A nack, or the channel closed before the confirm (pending
		// confirms resolve as nacks then): the closing error says why.
		cerr := pc.closeError(nil)
		s.put(pc, false)
		if cerr != nil {
			return failure(ctx, s.conn, cerr, timeout, "awaiting the confirm")
		}
		return webhook.Result{Class: herald.ErrorBroker, Message: "the broker did not confirm the message (nack)"}
	}
	// A mandatory message that found no queue is returned before it is
	// confirmed (the client dispatches both in arrival order), so the
	// return, if any, is already waiting.
	if ret, returned := pc.returned(messageID(r)); returned {
		s.put(pc, true)
		return webhook.Result{Class: herald.ErrorUnroutable, Message: herald.CleanLine(fmt.Sprintf(
			"returned by the broker: %s (%d): no queue bound to exchange %q for routing key %q",
			ret.ReplyText, ret.ReplyCode, ret.Exchange, ret.RoutingKey), 256)}
	}
	s.put(pc, true)
	return webhook.Result{Success: true}
}

// failure classifies an error of one attempt.
func failure(ctx context.Context, conn *amqp.Connection, err error, timeout time.Duration, doing string) webhook.Result {
	if ctx.Err() != nil {
		return webhook.Result{Class: herald.ErrorTimeout,
			Message: fmt.Sprintf("no confirm within %s (%s)", timeout, doing)}
	}
	var aerr *amqp.Error
	if errors.As(err, &aerr) {
		if conn.IsClosed() {
			return webhook.Result{Class: herald.ErrorConnection,
				Message: herald.CleanLine(fmt.Sprintf("connection lost while %s: %s", doing, aerr.Reason), 256)}
		}
		return webhook.Result{Class: herald.ErrorBroker,
			Message: herald.CleanLine(fmt.Sprintf("broker closed the channel while %s: %s (%d)", doing, aerr.Reason, aerr.Code), 256)}
	}
	if errors.Is(err, amqp.ErrClosed) {
		return webhook.Result{Class: herald.ErrorConnection, Message: "connection lost while " + doing}
	}
	return webhook.Result{Class: herald.ErrorBroker, Message: herald.CleanLine(doing+": "+err.Error(), 256)}
}

// Close closes every connection; later Sends fail.
func (p *Publisher) Close() { p.pool.Close() }

func dial(c *herald.Connection, timeout time.Duration) (*amqp.Connection, error) {
	cfg := amqp.Config{
		Dial:       amqp.DefaultDial(timeout),
		Properties: amqp.Table{"product": "herald", "connection_name": "herald " + c.Name},
	}
	if c.TLS != nil {
		tc, err := destination.TLSConfig(c.TLS)
		if err != nil {
			return nil, err
		}
		cfg.TLSClientConfig = tc
	}
	return amqp.DialConfig(c.URL, cfg)
}

// dialFailure classifies a failed dial; the message never holds the URL
// (it carries the password).
func dialFailure(name string, err error) webhook.Result {
	var (
		ne   net.Error
		ue   *url.Error
		oe   *net.OpError
		aerr *amqp.Error
	)
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return webhook.Result{Class: herald.ErrorTimeout,
			Message: fmt.Sprintf("connection %q: dial timed out", name)}
	case errors.Is(err, amqp.ErrCredentials) || errors.Is(err, amqp.ErrSASL):
		return webhook.Result{Class: herald.ErrorConnection,
			Message: fmt.Sprintf("connection %q: the broker refused the credentials", name)}
	case webhook.IsTLSError(err):
		return webhook.Result{Class: herald.ErrorTLS,
			Message: herald.CleanLine(fmt.Sprintf("connection %q: tls: %s", name, err.Error()), 256)}
	}
	msg := "dial failed"
	switch {
	case errors.As(err, &ue), strings.Contains(strings.ToLower(err.Error()), "amqp"):
		// URI errors may quote the URL.
		msg = "dial failed: bad URL"
	case errors.As(err, &oe) && oe.Err != nil:
		msg = oe.Op + ": " + oe.Err.Error()
	case errors.As(err, &aerr):
		msg = fmt.Sprintf("%s (%d)", aerr.Reason, aerr.Code)
	}
	return webhook.Result{Class: herald.ErrorConnection,
		Message: herald.CleanLine(fmt.Sprintf("connection %q: %s", name, msg), 256)}
}

// session is one AMQP connection and its pool of idle channels.
type session struct {
	conn    *amqp.Connection
	idleMax int

	mu       sync.Mutex
	idle     []*pubChan
	inflight int
	retired  bool
}

// pubChan is a channel in confirm mode, used by one publish at a time.
type pubChan struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
}

// take returns an idle channel or opens one, waiting at most until ctx
// ends (a broker that stopped answering must not hold the worker).
func (s *session) take(ctx context.Context) (*pubChan, error) {
	s.mu.Lock()
	s.inflight++
	for len(s.idle) > 0 {
		pc := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if !pc.ch.IsClosed() {
			s.mu.Unlock()
			return pc, nil
		}
	}
	s.mu.Unlock()
	type opened struct {
		pc  *pubChan
		err error
	}
	done := make(chan opened, 1)
	go func() {
		pc, err := s.open()
		done <- opened{pc, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			s.put(nil, false)
			return nil, o.err
		}
		return o.pc, nil
	case <-ctx.Done():
		go func() {
			if o := <-done; o.pc != nil {
				_ = o.pc.ch.Close()
			}
		}()
		s.put(nil, false)
		return nil, ctx.Err()
	}
}

func (s *session) open() (*pubChan, error) {
	ch, err := s.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	return &pubChan{
		ch: ch,
		// One publish at a time per channel: one return and one close at
		// most before the channel is dropped, so the listeners never block
		// the connection's reader.
		returns: ch.NotifyReturn(make(chan amqp.Return, 1)),
		closes:  ch.NotifyClose(make(chan *amqp.Error, 1)),
	}, nil
}

// put gives a channel back after a publish: kept for the next publish when
// keep and it is still open, else closed.
func (s *session) put(pc *pubChan, keep bool) {
	s.mu.Lock()
	s.inflight--
	if pc != nil && keep && !s.retired && len(s.idle) < s.idleMax && !pc.ch.IsClosed() {
		s.idle = append(s.idle, pc)
		pc = nil
	}
	closeConn := s.retired && s.inflight == 0
	s.mu.Unlock()
	if pc != nil {
		_ = pc.ch.Close()
	}
	if closeConn {
		_ = s.conn.Close()
	}
}

// retire closes the session once its publishes in flight ended (now when
// none runs): it was replaced (new settings), lost or the publisher closed.
func (s *session) retire() {
	s.mu.Lock()
	s.retired = true
	idle := s.idle
	s.idle = nil
	closeConn := s.inflight == 0
	s.mu.Unlock()
	for _, pc := range idle {
		_ = pc.ch.Close()
	}
	if closeConn {
		_ = s.conn.Close()
	}
}

// closeError is the error that closed the channel, or err when it did not
// close (or closed without one).
func (pc *pubChan) closeError(err error) error {
	select {
	case e, ok := <-pc.closes:
		if ok && e != nil {
			return e
		}
	default:
	}
	return err
}

// returned reports whether the broker returned the message id (drained
// from the channel's return listener).
func (pc *pubChan) returned(id string) (amqp.Return, bool) {
	for {
		select {
		case r, ok := <-pc.returns:
			if !ok {
				return amqp.Return{}, false
			}
			if r.MessageId == id {
				return r, true
			}
		default:
			return amqp.Return{}, false
		}
	}
}

// messageID is the AMQP message-id: the event id, as the wire
// contract says (the delivery id, which stays the same across retries, is
// the webhook-id header). A request without one (tests) uses the delivery
// id.
func messageID(r *webhook.Request) string {
	if r.EventID != "" {
		return r.EventID
	}
	return r.MsgID
}
