package destination

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/webhook"
)

// Backoff between failed dials of one connection (PoolConfig.BackoffMin,
// BackoffMax): the wait before the next dial doubles per consecutive
// failure, from DefaultBackoffMin up to DefaultBackoffMax.
const (
	DefaultBackoffMin = 200 * time.Millisecond
	DefaultBackoffMax = 10 * time.Second
)

// poolSweepInterval bounds how often a Pool looks for idle sessions.
const poolSweepInterval = time.Minute

// PoolConfig configures a Pool of sessions of type S (a broker client).
type PoolConfig[S any] struct {
	// Kind names the broker in log lines ("amqp", "nats", ...).
	Kind string
	// Logger receives dial failures and replacements (default: discard).
	Logger *slog.Logger
	// Dial opens a session of conn (required). The Pool calls it outside
	// its lock, at most once at a time per connection name.
	Dial func(conn *herald.Connection) (S, error)
	// DialFailure classifies a failed dial of connection name (required);
	// its message must never hold the URL (it may carry a password).
	DialFailure func(name string, err error) webhook.Result
	// Alive reports whether a session can still be used; a dead one is
	// redialled on next use. Nil: a session lives until it is replaced.
	Alive func(S) bool
	// Retire closes a session (required): in a goroutine of its own when
	// it is replaced or idle, in turn at Close.
	Retire func(S)
	// Shut closes a session at Close, or one a dial finished after Close
	// (default: Retire).
	Shut func(S)
	// BackoffMin and BackoffMax bound the wait after a failed dial during
	// which the same settings are not dialled again (attempts fail at once
	// with the last dial's result). BackoffMin ≤ 0 disables the backoff;
	// BackoffMax below BackoffMin becomes max(DefaultBackoffMax, BackoffMin).
	BackoffMin, BackoffMax time.Duration
	// IdleClose retires a session no Get used for this long (its
	// connection was deleted or renamed, or its subscriptions went),
	// checked at most once a minute. 0 keeps sessions until Close.
	IdleClose time.Duration
	// ClosedMessage is the message of a Get after Close.
	ClosedMessage string
}

// Pool keeps one session per connection name: dialled on first use,
// redialled when the connection's URL or TLS settings changed or the
// session died, retired when idle (PoolConfig.IdleClose) and at Close. A
// dial runs outside the pool's lock, so a broker that hangs holds only the
// attempts to its own connection, and each of those only until its
// context ends. Pool is safe for concurrent use.
type Pool[S any] struct {
	cfg PoolConfig[S]

	mu        sync.Mutex
	entries   map[string]*poolEntry[S] // by connection name
	closed    bool
	lastSweep time.Time
	now       func() time.Time // time.Now; tests move it
}

// poolEntry is one connection name's state.
type poolEntry[S any] struct {
	name     string
	sess     *poolSession[S] // nil when none
	dial     *poolDial[S]    // the dial in progress, nil when none
	failures int             // consecutive failed dials
	retryAt  time.Time       // no dial of lastKey before (backoff)
	lastKey  string          // what the last failed dial dialled
	lastErr  webhook.Result
	lastUsed time.Time
}

type poolSession[S any] struct {
	key string
	s   S
}

type poolDial[S any] struct {
	key  string
	done chan struct{}
	sess S
	fail *webhook.Result
}

// NewPool returns an empty Pool.
func NewPool[S any](cfg PoolConfig[S]) *Pool[S] {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Shut == nil {
		cfg.Shut = cfg.Retire
	}
	if cfg.BackoffMin > 0 && cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(DefaultBackoffMax, cfg.BackoffMin)
	}
	return &Pool[S]{cfg: cfg, entries: map[string]*poolEntry[S]{}, now: time.Now}
}

// connKey is what a session was dialled with: a change redials.
func connKey(c *herald.Connection) string {
	if c.TLS == nil {
		return c.URL
	}
	t := c.TLS
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%t", c.URL, t.CAFile, t.CertFile, t.KeyFile, t.ServerName, t.InsecureSkipVerify)
}

func (p *Pool[S]) alive(s S) bool { return p.cfg.Alive == nil || p.cfg.Alive(s) }

// Get returns the session of conn, dialling when there is none, it died
// or conn's URL/TLS changed. It waits for a dial at most until ctx ends
// (then the result is a timeout).
func (p *Pool[S]) Get(ctx context.Context, conn *herald.Connection) (S, *webhook.Result) {
	var zero S
	key := connKey(conn)
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return zero, &webhook.Result{Class: herald.ErrorConnection, Message: p.cfg.ClosedMessage}
		}
		now := p.now()
		p.sweep(now)
		e := p.entries[conn.Name]
		if e == nil {
			e = &poolEntry[S]{name: conn.Name}
			p.entries[conn.Name] = e
		}
		e.lastUsed = now
		if s := e.sess; s != nil {
			if s.key == key && p.alive(s.s) {
				p.mu.Unlock()
				return s.s, nil
			}
			e.sess = nil
			if s.key != key {
				p.cfg.Logger.Info(p.cfg.Kind+" connection settings changed: reconnecting", "connection", conn.Name)
			} else {
				p.cfg.Logger.Warn(p.cfg.Kind+" connection lost: reconnecting", "connection", conn.Name)
			}
			go p.cfg.Retire(s.s)
		}
		d := e.dial
		if d == nil {
			if p.cfg.BackoffMin > 0 && key == e.lastKey && now.Before(e.retryAt) {
				res := e.lastErr
				p.mu.Unlock()
				res.Message = herald.CleanLine(res.Message+" (next dial after backoff)", 256)
				return zero, &res
			}
			d = &poolDial[S]{key: key, done: make(chan struct{})}
			e.dial = d
			go p.runDial(e, d, conn)
		}
		p.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return zero, &webhook.Result{Class: herald.ErrorTimeout,
				Message: fmt.Sprintf("could not connect to connection %q within the timeout", conn.Name)}
		}
		if d.key != key {
			continue // a dial of older settings finished: look again
		}
		if d.fail != nil {
			res := *d.fail
			return zero, &res
		}
		// Else loop: the session may already be dead or replaced.
		if p.alive(d.sess) {
			return d.sess, nil
		}
	}
}

// runDial dials without holding p.mu, so waiters can give up at their own
// deadline and other connections are never held.
func (p *Pool[S]) runDial(e *poolEntry[S], d *poolDial[S], conn *herald.Connection) {
	s, err := p.cfg.Dial(conn)
	p.mu.Lock()
	defer p.mu.Unlock()
	defer close(d.done)
	e.dial = nil
	if err != nil {
		res := p.cfg.DialFailure(e.name, err)
		d.fail = &res
		if p.cfg.BackoffMin > 0 {
			e.failures++
			backoff := min(p.cfg.BackoffMin<<min(e.failures-1, 16), p.cfg.BackoffMax)
			e.retryAt = p.now().Add(backoff)
			e.lastKey, e.lastErr = d.key, res
			p.cfg.Logger.Warn(p.cfg.Kind+" dial failed", "connection", e.name, "error", res.Message,
				"failures", e.failures, "retry_after", backoff)
		}
		return
	}
	d.sess = s
	if p.closed {
		go p.cfg.Shut(s)
		return
	}
	if e.failures > 0 {
		p.cfg.Logger.Info(p.cfg.Kind+" connected again", "connection", e.name, "after_failures", e.failures)
	}
	e.failures, e.lastKey = 0, ""
	if old := e.sess; old != nil {
		go p.cfg.Retire(old.s)
	}
	e.sess = &poolSession[S]{key: d.key, s: s}
}

// sweep retires the sessions unused for IdleClose; p.mu is held.
func (p *Pool[S]) sweep(now time.Time) {
	if p.cfg.IdleClose <= 0 || now.Sub(p.lastSweep) < poolSweepInterval {
		return
	}
	p.lastSweep = now
	for name, e := range p.entries {
		if e.dial == nil && now.Sub(e.lastUsed) >= p.cfg.IdleClose {
			delete(p.entries, name)
			if e.sess != nil {
				go p.cfg.Retire(e.sess.s)
				p.cfg.Logger.Info(p.cfg.Kind+" connection unused; closed", "connection", name, "idle", p.cfg.IdleClose)
			}
		}
	}
}

// Close shuts every session (PoolConfig.Shut), one after the other; later Gets fail as
// connection errors with ClosedMessage, and dials in progress retire
// what they open.
func (p *Pool[S]) Close() {
	p.mu.Lock()
	p.closed = true
	var open []S
	for _, e := range p.entries {
		if e.sess != nil {
			open = append(open, e.sess.s)
		}
	}
	p.entries = map[string]*poolEntry[S]{}
	p.mu.Unlock()
	for _, s := range open {
		p.cfg.Shut(s)
	}
}

// Len is the number of connections with a session open.
func (p *Pool[S]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.entries {
		if e.sess != nil {
			n++
		}
	}
	return n
}

// SetNow replaces the pool's clock (tests of IdleClose).
func (p *Pool[S]) SetNow(now func() time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
}
