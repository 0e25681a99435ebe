package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Runner timing defaults.
const (
	// DefaultBackoffMin and DefaultBackoffMax bound the wait before a
	// runner dials again after a failure: it doubles per consecutive
	// failure and resets once a consumer has settled a batch.
	DefaultBackoffMin = 200 * time.Millisecond
	DefaultBackoffMax = 10 * time.Second
	// settleTimeout bounds one Settle call, which runs even while the
	// node shuts down: the events are committed, the broker should know.
	settleTimeout = 10 * time.Second
	// pendingInterval is how often a runner asks the broker for its
	// backlog.
	pendingInterval = 10 * time.Second
)

// Publisher stores events through the group commit (*ingest.Ingester):
// PublishMany returns once the events committed, one result per event.
type Publisher interface {
	PublishMany(ctx context.Context, events []*herald.Event) ([]store.EventInsertResult, error)
}

// runner consumes one source on this node until its context ends.
type runner struct {
	m     *Manager
	src   *herald.Source
	conv  *Converter
	stats *stats
	// conn is the connection the current consumer dialled (nil before the
	// first dial): the manager restarts the runner when it changes.
	conn   connStamp
	cancel context.CancelFunc
	done   chan struct{}
}

// connStamp identifies a connection's settings.
type connStamp struct {
	url     string
	updated time.Time
}

func (r *runner) log() *slog.Logger { return r.m.cfg.Logger.With("source", r.src.Name) }

// run dials, consumes and redials with backoff until ctx ends.
func (r *runner) run(ctx context.Context) {
	defer close(r.done)
	backoff := r.m.cfg.BackoffMin
	for ctx.Err() == nil {
		r.stats.setState(herald.SourceConnecting, r.lastError())
		c, err := r.dial(ctx)
		if err == nil {
			var progressed bool
			progressed, err = r.consume(ctx, c)
			_ = c.Close()
			if progressed {
				backoff = r.m.cfg.BackoffMin
			}
		}
		if ctx.Err() != nil {
			return
		}
		var st string
		if errors.Is(err, errStore) {
			st = herald.SourceStoreUnavailable
		} else {
			st = herald.SourceFailed
		}
		msg := herald.CleanLine(err.Error(), 300)
		r.stats.setState(st, msg)
		r.log().Warn("source consumer stopped; retrying", "state", st, "error", msg, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, r.m.cfg.BackoffMax)
	}
}

func (r *runner) lastError() string {
	_, e := r.stats.getState()
	return e
}

// dial resolves the connection, checks it still suits the source, and
// opens a consumer.
func (r *runner) dial(ctx context.Context) (Consumer, error) {
	conn, err := r.m.cfg.Connections.ConnectionResolve(ctx, r.src.Connection)
	if err != nil {
		return nil, fmt.Errorf("connection %q is not available: %s", r.src.Connection, herald.CleanLine(err.Error(), 160))
	}
	if conn.Type != r.src.Type {
		return nil, fmt.Errorf("connection %q is of type %s, not %s", conn.Name, conn.Type, r.src.Type)
	}
	if !conn.Allows(r.src.Tenant) {
		return nil, fmt.Errorf("connection %q is not granted to tenant %q", conn.Name, r.src.Tenant)
	}
	r.m.setStamp(r, connStamp{url: conn.URL, updated: conn.UpdatedAt})
	dctx, cancel := context.WithTimeout(ctx, r.m.cfg.DialTimeout)
	defer cancel()
	c, err := r.m.cfg.Dialers.Dial(dctx, DialParams{Source: r.src, Connection: conn, Node: r.m.cfg.Node,
		Prefetch: window(r.src.PrefetchOrDefault())})
	if err != nil {
		return nil, err
	}
	return c, nil
}
