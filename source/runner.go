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
		Prefetch: r.src.PrefetchOrDefault()})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// errStore marks a commit the store refused: the consumer stops without
// settling anything.
var errStore = errors.New("the store did not commit")

// consume receives, converts, publishes and settles batches until an
// error; progressed says whether at least one batch was settled.
func (r *runner) consume(ctx context.Context, c Consumer) (progressed bool, err error) {
	r.stats.setState(herald.SourceConsuming, "")
	r.updatePending(ctx, c)
	lastPending := time.Now()
	prefetch := r.src.PrefetchOrDefault()
	for {
		msgs, err := c.Receive(ctx, prefetch)
		if err != nil {
			return progressed, err
		}
		if len(msgs) == 0 {
			continue
		}
		if err := r.handle(ctx, c, msgs); err != nil {
			return progressed, err
		}
		progressed = true
		if time.Since(lastPending) >= pendingInterval {
			r.updatePending(ctx, c)
			lastPending = time.Now()
		}
	}
}

func (r *runner) updatePending(ctx context.Context, c Consumer) {
	if n, ok := c.Pending(ctx); ok {
		r.stats.setPending(n)
	}
}

// handle converts and publishes one batch, then settles it in receive
// order: every message whose event committed (or already existed) is
// acknowledged, every message that cannot become an event is rejected. A
// store failure returns before anything is settled.
func (r *runner) handle(ctx context.Context, c Consumer, msgs []*Message) error {
	var (
		events []*herald.Event
		owners []int // msgs index of each event
	)
	for i, m := range msgs {
		m.RejectReason, m.RejectMessage = "", ""
		ev, rj := r.conv.Convert(m)
		if rj != nil {
			m.RejectReason, m.RejectMessage = rj.Reason, rj.Message
			continue
		}
		events = append(events, ev)
		owners = append(owners, i)
	}
	results := make([]publishResult, len(events))
	if len(events) > 0 {
		if err := r.publish(ctx, events, results); err != nil {
			return fmt.Errorf("%w: %s", errStore, herald.CleanLine(err.Error(), 200))
		}
	}
	var dups int64
	for n, res := range results {
		switch {
		case res.err != nil:
			m := msgs[owners[n]]
			m.RejectReason, m.RejectMessage = herald.RejectInvalid, herald.CleanLine(res.err.Error(), 300)
		case res.res.Duplicate:
			dups++
		}
	}
	var (
		acked, rejected []*Message
		rejects         []herald.SourceReject
	)
	at := now()
	for _, m := range msgs {
		if m.RejectReason == "" {
			acked = append(acked, m)
			continue
		}
		rejected = append(rejected, m)
		rejects = append(rejects, herald.SourceReject{At: at, Reason: m.RejectReason, Message: m.RejectMessage,
			MessageID: herald.CleanLine(m.MessageID, 200), Excerpt: excerpt(m.Body)})
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := c.Settle(sctx, acked, rejected); err != nil {
		// The events are stored: the broker redelivers what it did not
		// take, and those become duplicates.
		r.stats.add(int64(len(acked)), dups, nil)
		return fmt.Errorf("settling %d messages: %w", len(acked)+len(rejected), err)
	}
	r.stats.add(int64(len(acked)), dups, rejects)
	for _, rj := range rejects {
		r.m.cfg.Observer.ObserveSourceRejected(r.src.Name, rj.Reason)
	}
	r.m.cfg.Observer.ObserveSourceConsumed(r.src.Name, len(acked), int(dups))
	return nil
}

type publishResult struct {
	res store.EventInsertResult
	err error // a refusal of this event alone (not transient)
}

// publish commits events, filling out. A transient store error (the store
// did not answer, the node is closing) is returned as is: nothing may be
// settled. Any other error splits the batch in halves, down to the single
// event the store refuses, so one bad event is rejected alone.
func (r *runner) publish(ctx context.Context, events []*herald.Event, out []publishResult) error {
	res, err := r.m.cfg.Publisher.PublishMany(ctx, events)
	if err == nil {
		if len(res) != len(events) {
			return fmt.Errorf("store answered %d results for %d events", len(res), len(events))
		}
		for i := range res {
			out[i] = publishResult{res: res[i]}
		}
		return nil
	}
	if transient(err) || ctx.Err() != nil {
		return err
	}
	if len(events) == 1 {
		out[0] = publishResult{err: err}
		return nil
	}
	mid := len(events) / 2
	if err := r.publish(ctx, events[:mid], out[:mid]); err != nil {
		return err
	}
	return r.publish(ctx, events[mid:], out[mid:])
}

// transient reports an error that says nothing about the events: the
// store did not answer, or the node is shutting down (both carry
// CodeStoreUnavailable).
func transient(err error) bool {
	return errors.Is(err, herald.ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled)
}
