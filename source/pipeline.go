package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// A runner keeps at most batchesInFlight batches received and not yet
// settled: while batch N commits, batch N+1 is received and converted, so
// conversion and the broker's round trips overlap the group commit
// instead of waiting for it. Each batch holds at most Source.Prefetch
// messages, so the broker is asked to let a consumer hold window(prefetch)
// = 2 × prefetch unsettled (DialParams.Prefetch): memory in flight per
// source is bounded by twice the prefetch (× MaxSourceBody at worst).
//
// Batch N+1 takes what arrives until N's commit returns (at most
// prefetch), so at low rates a message waits for the commit running when
// it arrived and then its own, as without the overlap.
//
// The rules, whatever the timing:
//   - One commit at a time, in receive order: batch N+1 is handed to the
//     group commit only once batch N's commit returned without a
//     transient error.
//   - Settle calls come in receive order, and a batch is settled only
//     after its own commit returned: no message is acknowledged before its
//     event is stored.
//   - A transient store error on batch N settles nothing of N nor of the
//     batch received behind it (N+1, never committed); batches before N
//     are settled already (their commits returned). The consumer is closed
//     and the broker redelivers N and N+1.
//   - A Receive, Settle or shutdown while a commit is running waits for
//     it and settles its batch when it committed (fewer redeliveries).
const batchesInFlight = 2

// window is the consumer's unsettled bound for batches of prefetch.
func window(prefetch int) int { return batchesInFlight * prefetch }

// errStore marks a commit the store refused: the consumer stops without
// settling the batch (nor the one behind it).
var errStore = errors.New("the store did not commit")

// batch is one Receive's messages on their way through the pipeline.
type batch struct {
	msgs    []*Message
	events  []*herald.Event
	owners  []int // msgs index of each event
	results []publishResult
	// err is the commit's transient error (nothing of the batch may be
	// settled), set before done closes.
	err  error
	done chan struct{}
	// committed is cancelled once the commit returned: a Receive waiting
	// for the next batch under it returns then, so that this batch is
	// settled without waiting for new messages.
	committed context.Context
}

// consume receives, converts, publishes and settles batches until an
// error, two batches in flight (see batchesInFlight); progressed says
// whether at least one batch was settled.
func (r *runner) consume(ctx context.Context, c Consumer) (progressed bool, err error) {
	r.stats.setState(herald.SourceConsuming, "")
	r.updatePending(ctx, c)
	lastPending := time.Now()
	prefetch := r.src.PrefetchOrDefault()
	// cur is the batch committing (or committed) and not settled yet.
	var cur *batch
	defer func() {
		if cur != nil {
			<-cur.done // never leave a commit running behind Close
		}
	}()
	for {
		rctx := ctx
		if cur != nil {
			rctx = cur.committed
		}
		msgs, rerr := c.Receive(rctx, prefetch)
		if rerr != nil && cur != nil && ctx.Err() == nil && rctx.Err() != nil {
			rerr = nil // cur's commit returned while Receive waited: settle it
		}
		var next *batch
		if rerr == nil && len(msgs) > 0 {
			next = &batch{}
			r.convert(next, msgs)
		}
		// While cur commits, keep filling next up to prefetch: what
		// arrives during a commit is committed right after it, in one
		// batch, as when the steps did not overlap (a batch closed at its
		// first message would make the next arrivals wait one more
		// commit).
		for cur != nil && next != nil && len(next.msgs) < prefetch && rerr == nil {
			more, err := c.Receive(rctx, prefetch-len(next.msgs))
			if err != nil {
				if ctx.Err() != nil || rctx.Err() == nil {
					rerr, next = err, nil // never committed: redelivered
				}
				break
			}
			r.convert(next, more)
		}
		if cur != nil {
			<-cur.done
			if cur.err != nil {
				return progressed, fmt.Errorf("%w: %s", errStore, herald.CleanLine(cur.err.Error(), 200))
			}
		}
		if next != nil {
			r.commit(ctx, next) // runs while cur is settled
		}
		if cur != nil {
			settled := cur
			cur = next
			if err := r.settle(ctx, c, settled); err != nil {
				return progressed, err
			}
			progressed = true
		} else {
			cur = next
		}
		if rerr != nil {
			return progressed, rerr
		}
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

// convert converts msgs and appends them to b; those that cannot become
// events get their reject reason.
func (r *runner) convert(b *batch, msgs []*Message) {
	for _, m := range msgs {
		m.RejectReason, m.RejectMessage = "", ""
		ev, rj := r.conv.Convert(m)
		b.msgs = append(b.msgs, m)
		if rj != nil {
			m.RejectReason, m.RejectMessage = rj.Reason, rj.Message
			continue
		}
		b.events = append(b.events, ev)
		b.owners = append(b.owners, len(b.msgs)-1)
	}
}

// commit starts publishing b's events; b.done closes when it returned.
func (r *runner) commit(ctx context.Context, b *batch) {
	b.results = make([]publishResult, len(b.events))
	b.done = make(chan struct{})
	committed, cancel := context.WithCancel(ctx)
	b.committed = committed
	if len(b.events) == 0 {
		close(b.done)
		cancel()
		return
	}
	go func() {
		defer cancel()      // second: a Receive it wakes finds done closed
		defer close(b.done) // first
		b.err = r.publish(ctx, b.events, b.results)
	}()
}

// settle settles a committed batch in receive order: every message whose
// event committed (or already existed) is acknowledged, every message
// that cannot become an event is rejected.
func (r *runner) settle(ctx context.Context, c Consumer, b *batch) error {
	var dups int64
	for n, res := range b.results {
		switch {
		case res.err != nil:
			m := b.msgs[b.owners[n]]
			m.RejectReason, m.RejectMessage = herald.RejectInvalid, herald.CleanLine(res.err.Error(), 300)
		case res.res.Duplicate:
			dups++
		}
	}
	var (
		acked    = make([]*Message, 0, len(b.msgs))
		rejected []*Message
		rejects  []herald.SourceReject
	)
	at := now()
	for _, m := range b.msgs {
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
