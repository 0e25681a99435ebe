package redisdest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/internal/redisconn"
	"github.com/heraldhq/herald/webhook"
)

// Client limits. The attempt's own timeout (the subscription's timeout_ms)
// bounds every call too: the client honours context deadlines.
const (
	dialTimeout = 5 * time.Second
	ioTimeout   = 10 * time.Second
	// idleClose closes a client no attempt used for this long
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
	// Logger receives client replacements; nil discards.
	Logger *slog.Logger
}

// Publisher appends one stream entry per attempt. It implements
// destination.Publisher and is safe for concurrent use.
type Publisher struct {
	conns destination.Connections
	// pool holds the go-redis client of each connection (by name); a
	// client dials by itself, so the pool's dial only builds it.
	pool *destination.Pool[*redis.Client]
}

// New returns a Publisher resolving connections through cfg.Connections.
func New(cfg Config) *Publisher {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	setLogger.Do(func() { redis.SetLogger(clientLogger{logger}) })
	return &Publisher{conns: cfg.Connections, pool: destination.NewPool(destination.PoolConfig[*redis.Client]{
		Kind:   "redis",
		Logger: logger,
		Dial: func(conn *herald.Connection) (*redis.Client, error) {
			opt, err := options(conn)
			if err != nil {
				return nil, err
			}
			return redis.NewClient(opt), nil
		},
		DialFailure: func(name string, err error) webhook.Result {
			return webhook.Result{Class: herald.ErrorConnectionUnset, Message: fmt.Sprintf("connection %q: %s", name, err)}
		},
		// Attempts in flight on a replaced client fail as connection
		// errors and are retried through the tiers on the new one.
		Retire:        func(rdb *redis.Client) { _ = rdb.Close() },
		IdleClose:     idleClose,
		ClosedMessage: "redis publisher closed",
	})}
}

// setLogger routes go-redis's own log lines (one per failed dial, by
// default printed to stderr) to the first Publisher's logger at debug
// level: go-redis has one logger per process. The attempt's failure is
// recorded anyway; during an outage these lines would flood the log.
var setLogger sync.Once

// clientLogger adapts slog to go-redis's logger.
type clientLogger struct{ logger *slog.Logger }

func (l clientLogger) Printf(ctx context.Context, format string, v ...any) {
	l.logger.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// Close closes every client. Sends after Close fail as connection errors.
func (p *Publisher) Close() { p.pool.Close() }

// errAttemptTimeout is the cause of the per-attempt context, to tell our own
// timeout from the caller's deadline or cancellation.
var errAttemptTimeout = errors.New("attempt timeout")

// Send implements destination.Publisher: one XADD.
func (p *Publisher) Send(ctx context.Context, r *webhook.Request) webhook.Result {
	start := time.Now()
	res := p.send(ctx, r)
	res.Duration = time.Since(start)
	res.Message = herald.CleanLine(res.Message, maxMessageLen)
	return res
}

func (p *Publisher) send(ctx context.Context, r *webhook.Request) (sent webhook.Result) {
	d := r.Destination
	// The API's rule, again at send time.
	if err := herald.CheckRedisStream(d.Stream); err != nil {
		return webhook.Result{Class: herald.ErrorInvalidRequest, Message: "redis stream " + err.Error()}
	}
	if d.MaxLen < 0 {
		return webhook.Result{Class: herald.ErrorInvalidRequest, Message: fmt.Sprintf("redis maxlen %d is negative", d.MaxLen)}
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
	rdb, fail := p.pool.Get(ctx, conn)
	if fail != nil {
		return *fail
	}

	timeout := destination.Timeout(r)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	defer cancel()

	args := &redis.XAddArgs{Stream: d.Stream, Values: fields(r, msg)}
	if d.MaxLen > 0 {
		args.MaxLen = d.MaxLen
		args.Approx = true
	}
	id, err := rdb.XAdd(ctx, args).Result()
	if err != nil {
		cls, m := classify(ctx, err, timeout)
		return webhook.Result{Class: cls, Message: m}
	}
	// The entry id, so an operator can find the entry (XRANGE stream id id).
	return webhook.Result{Success: true, Excerpt: "entry " + id}
}

// fields lists the entry's field/value pairs in a fixed order: id, type,
// timestamp, the headers by name, body.
func fields(r *webhook.Request, msg *destination.Message) []any {
	names := make([]string, 0, len(msg.Headers))
	for k := range msg.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]any, 0, 8+2*len(names))
	out = append(out, "id", msg.ID, "type", r.EventType, "timestamp", msg.Headers[destination.HeaderTimestamp])
	for _, k := range names {
		out = append(out, k, msg.Headers[k])
	}
	return append(out, "body", msg.Body)
}

// options builds the client options of conn (internal/redisconn).
func options(conn *herald.Connection) (*redis.Options, error) {
	return redisconn.Options(conn, dialTimeout, ioTimeout)
}

// classify maps an XADD error to a failure class and a one-line message.
func classify(ctx context.Context, err error, timeout time.Duration) (herald.ErrorClass, string) {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// The server's answer: WRONGTYPE, OOM, NOPERM, READONLY, ...
		return herald.ErrorBroker, "redis: " + rerr.Error()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		// go-redis sets the socket deadline to the context's: the read may
		// time out a hair before the context says it is done.
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 5*time.Millisecond {
			<-ctx.Done()
		}
	}
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errAttemptTimeout):
			return herald.ErrorTimeout, "no reply from redis within " + timeout.String()
		case errors.Is(cause, context.DeadlineExceeded):
			return herald.ErrorTimeout, "no reply from redis before the caller's deadline"
		default:
			return herald.ErrorConnection, "attempt cancelled"
		}
	}
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, redis.ErrPoolTimeout):
		return herald.ErrorTimeout, "redis: every pooled connection is busy"
	case errors.Is(err, redis.ErrClosed):
		return herald.ErrorConnection, "redis client closed"
	case errors.As(err, &dnsErr):
		return herald.ErrorDNS, "DNS lookup of " + dnsErr.Name + " failed: " + dnsErr.Err
	case webhook.IsTLSError(err):
		return herald.ErrorTLS, "redis: " + err.Error()
	case errors.As(err, &ne) && ne.Timeout():
		return herald.ErrorTimeout, "redis: timed out: " + err.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return herald.ErrorConnection, "redis: connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return herald.ErrorConnection, "redis: connection reset by peer"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return herald.ErrorConnection, "redis: connection closed before the reply"
	}
	return herald.ErrorConnection, "redis: " + err.Error()
}
