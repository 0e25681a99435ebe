package store

import (
	"context"
	"sync"
	"time"

	"github.com/heraldhq/herald"
)

// Retention: what RetentionSweep deletes, the same rules for every backend
// (RetentionRun below runs them; a backend only supplies the statements).
// Besides finished deliveries, dead letters and events (RetentionSweep),
// these tables would otherwise grow for ever, so the sweep covers them
// too, each under the retention whose rows could still need it:
//
//   - Per-key ordering state (one row per subscription and key, created by
//     the first claim of the key). Under Events retention: a key's row goes
//     once no delivery of the key is pending or in flight, nothing holds
//     the key, its last claim (the key's last send) is older than the Events
//     retention and its subscription's key interval has run out since. The
//     row is what lets "latest" skip a version not newer than the last one
//     delivered, so it is kept as long as an event is (the Events retention
//     is also the duplicate window): a version of the key published more
//     than that after the key's last send is compared with nothing and is
//     sent, exactly as an event id repeated after the duplicate window is
//     stored again. A key that is published again starts over from an empty
//     state at its next claim. A manual retry of an old delivery of such a
//     key is sent too (it would have been skipped as not newer).
//   - The key rows of a deleted subscription go at the next sweep, whatever
//     the retention: nothing claims a deleted subscription's deliveries,
//     and DeliveryRetry refuses them.
//   - Deleted subscriptions (SubscriptionDelete only marks them). Under
//     Delivered retention: a deleted subscription goes for good, with its
//     secrets and throttle state, once it was deleted longer than the
//     Delivered retention ago and none of its deliveries is left in any
//     state. Its unfinished deliveries were cancelled when it was deleted,
//     so they are kept that long anyway; the same wait outlasts any node's
//     fan-out cache that still names it.
//   - Rotated-out secrets. Under Delivered retention: a secret that expired
//     longer than the Delivered retention ago goes, unless it is its
//     subscription's last (a subscription always keeps a secret that does
//     not expire before the cutoff; the current secret never expires).
//   - Orphan attempts: attempt rows whose delivery does not exist. No
//     retention keeps them (nothing can show them). DeliveryCompleteMany
//     records no attempt for a missing delivery (store/complete.go), but
//     older herald versions on PostgreSQL did, and a completion racing the
//     sweep that deletes its delivery can still leave one.
//
// Key rows and attempts are not found through an index on age (an index
// on last_sent_at would cost every claim; attempts have none): the sweep
// scans them in primary-key order, at most RetentionScanRows rows of each
// per sweep and BatchSize rows per transaction, resuming where the previous
// sweep of the same store stopped (SweepCursor). A sweep so costs the same
// however many keys and attempts are stored, and what is due goes within a
// full pass (rows/RetentionScanRows sweeps), not at the first sweep after
// its cutoff.

// RetentionSweepParams are the inputs of RetentionSweep. A retention of
// zero or less keeps that class forever (Cutoffs, store/retention.go).
type RetentionSweepParams struct {
	// Delivered is how long finished deliveries (delivered, skipped,
	// superseded, cancelled) are kept after their last update. It also
	// keeps deleted subscriptions after their deletion and rotated-out
	// secrets after their expiry.
	Delivered time.Duration
	// Dead is how long dead letters are kept after they died.
	Dead time.Duration
	// Events is how long events are kept after their creation; an event is
	// deleted only once none of its deliveries is left. It is also the
	// window in which a repeated event id is answered as a duplicate, and
	// how long a key's ordering state outlives the key's last send.
	Events time.Duration
	// BatchSize caps the rows deleted per transaction (0 means 1000).
	BatchSize int
	Now       time.Time
}

// RetentionSweepResult counts what a sweep deleted.
type RetentionSweepResult struct {
	// Deliveries counts finished (not dead) deliveries deleted.
	Deliveries int
	// Dead counts dead letters deleted.
	Dead int
	// Events counts events deleted.
	Events int
	// Keys counts per-key ordering state rows deleted.
	Keys int
	// Subscriptions counts deleted subscriptions removed for good (with
	// their secrets, key state and throttle state, not counted apart).
	Subscriptions int
	// Secrets counts rotated-out secrets deleted.
	Secrets int
	// Attempts counts orphan attempts deleted (attempts deleted with their
	// delivery are not counted).
	Attempts int
}

// RetentionStates are the finished delivery states Delivered retention
// applies to (dead letters have their own).
var RetentionStates = []herald.DeliveryState{
	herald.DeliveryDelivered, herald.DeliverySkipped, herald.DeliverySuperseded, herald.DeliveryCancelled,
}

// RetentionScanRows caps the rows one RetentionSweep examines in each
// scanned table. At the default sweep interval (a minute) a pass over a
// million rows takes under two hours.
const RetentionScanRows = 10_000

// RetentionCutoffs are the instants before which each class goes; a zero
// time keeps the class.
type RetentionCutoffs struct {
	// Delivered, Dead and Events are the params' own classes.
	Delivered, Dead, Events time.Time
	// Keys applies to a key's last send (Events retention).
	Keys time.Time
	// Subscriptions applies to deleted_at (Delivered retention).
	Subscriptions time.Time
	// Secrets applies to expires_at (Delivered retention).
	Secrets time.Time
}

// Cutoffs applies the rules above to the params.
func (p *RetentionSweepParams) Cutoffs() RetentionCutoffs {
	before := func(d time.Duration) time.Time {
		if d <= 0 {
			return time.Time{}
		}
		return p.Now.Add(-d)
	}
	return RetentionCutoffs{
		Delivered:     before(p.Delivered),
		Dead:          before(p.Dead),
		Events:        before(p.Events),
		Keys:          before(p.Events),
		Subscriptions: before(p.Delivered),
		Secrets:       before(p.Delivered),
	}
}

// Total is the number of rows the sweep deleted, all classes together.
func (r *RetentionSweepResult) Total() int {
	return r.Deliveries + r.Dead + r.Events + r.Keys + r.Subscriptions + r.Secrets + r.Attempts
}

// SweepCursor remembers where a store's scan of one table stopped
// (the primary key of the last row examined). The zero value starts at the
// beginning. Safe for concurrent use.
type SweepCursor struct {
	mu    sync.Mutex
	after []string
}

// SweepScanStep examines up to batch rows whose primary key is greater
// than after (nil: from the first row), in primary-key order, in one
// transaction; deletes those of them the rule says go (for orphan attempts:
// every attempt of a delivery id that has no delivery, examined or not);
// and returns the primary key of the last row examined, how many rows it
// examined and how many it deleted.
type SweepScanStep func(ctx context.Context, after []string, batch int) (last []string, examined, deleted int, err error)

// Scan runs step batch by batch from where the previous scan stopped until
// it has examined RetentionScanRows rows or reached the end of the table
// (the next scan then starts over), and returns how many rows it deleted.
func (c *SweepCursor) Scan(ctx context.Context, batch int, step SweepScanStep) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	deleted := 0
	for seen := 0; seen < RetentionScanRows; {
		want := min(batch, RetentionScanRows-seen)
		last, examined, n, err := step(ctx, c.after, want)
		deleted += n
		if err != nil {
			return deleted, err
		}
		if examined < want {
			c.after = nil // the end: start over next time
			return deleted, nil
		}
		c.after = last
		seen += examined
	}
	return deleted, nil
}

// RetentionBatchDefault is the rows deleted per transaction when
// RetentionSweepParams leave BatchSize at 0 (River's cleaner found ~1 s per
// 1,000-row batch on a busy table; smaller batches keep locks, the SQLite
// writer and WAL bursts short).
const RetentionBatchDefault = 1000

// RetentionCursors are where a store's scans of key rows and of attempts
// stopped. A store keeps one for its lifetime; the zero value starts at the
// beginning of both tables.
type RetentionCursors struct {
	Keys, Attempts SweepCursor
}

// RetentionBackend is what RetentionRun needs of a store: one method per
// step of the sweep, each one statement (one transaction) over at most
// Limit rows, returning how many rows it deleted. The order of the steps,
// the batching and when to stop are RetentionRun's; the rule each
// statement applies is the comment at the top of this file.
type RetentionBackend interface {
	// RetentionCursors returns the store's scan positions.
	RetentionCursors() *RetentionCursors
	// RetentionDeliveryDelete deletes up to Limit deliveries in States
	// last updated before Before, with their attempts. A delivery that is
	// pending or in flight (again) is never deleted.
	RetentionDeliveryDelete(ctx context.Context, params *RetentionDeliveryDeleteParams) (int, error)
	// RetentionEventDelete deletes up to Limit events created before
	// Before that have no delivery left.
	RetentionEventDelete(ctx context.Context, params *RetentionEventDeleteParams) (int, error)
	// RetentionKeyScan is a SweepScanStep over key rows.
	RetentionKeyScan(ctx context.Context, params *RetentionKeyScanParams) (*RetentionScanResult, error)
	// RetentionSecretDelete deletes up to Limit secrets that expired
	// before Before, never one whose subscription has no other secret
	// outliving Before.
	RetentionSecretDelete(ctx context.Context, params *RetentionSecretDeleteParams) (int, error)
	// RetentionSubscriptionDelete removes up to Limit subscriptions
	// deleted before Before that have no delivery left, with every row
	// that names them (secrets, key and throttle state).
	RetentionSubscriptionDelete(ctx context.Context, params *RetentionSubscriptionDeleteParams) (int, error)
	// RetentionAttemptScan is a SweepScanStep over attempts in delivery-id
	// order.
	RetentionAttemptScan(ctx context.Context, params *RetentionAttemptScanParams) (*RetentionScanResult, error)
}

// RetentionDeliveryDeleteParams are the inputs of RetentionDeliveryDelete.
type RetentionDeliveryDeleteParams struct {
	States []herald.DeliveryState
	Before time.Time
	Limit  int
}

// RetentionEventDeleteParams are the inputs of RetentionEventDelete.
type RetentionEventDeleteParams struct {
	Before time.Time
	Limit  int
}

// RetentionSecretDeleteParams are the inputs of RetentionSecretDelete.
type RetentionSecretDeleteParams struct {
	Before time.Time
	Limit  int
}

// RetentionSubscriptionDeleteParams are the inputs of
// RetentionSubscriptionDelete.
type RetentionSubscriptionDeleteParams struct {
	Before time.Time
	Limit  int
}

// RetentionKeyScanParams are the inputs of RetentionKeyScan: the rows
// after After (subscription id, key; nil: from the first), at most Limit.
// A deleted subscription's rows always go; an idle key's go when IdleBefore
// is set (its last send before IdleBefore and its key interval run out at
// Now).
type RetentionKeyScanParams struct {
	After      []string
	Limit      int
	IdleBefore time.Time
	Now        time.Time
}

// RetentionAttemptScanParams are the inputs of RetentionAttemptScan: the
// rows after delivery id After[0] (nil: from the first), at most Limit.
type RetentionAttemptScanParams struct {
	After []string
	Limit int
}

// RetentionScanResult is what one scan step did (SweepScanStep).
type RetentionScanResult struct {
	// Last is the primary key of the last row examined.
	Last []string
	// Examined and Deleted count rows.
	Examined, Deleted int
}

// RetentionRun is RetentionSweep for every backend: it runs the steps in
// order — finished deliveries, dead letters, events, key rows, secrets,
// deleted subscriptions, orphan attempts — each delete step batch after
// batch until a batch deletes fewer than BatchSize rows, and each scan
// step through its cursor (SweepCursor.Scan). Events come after the
// deliveries that kept them, subscriptions after the deliveries and secrets
// that name them. A class whose cutoff is zero is skipped; key rows and
// attempts are scanned every time (a deleted subscription's key rows and
// orphan attempts go whatever the retention). The first error stops the
// sweep, with what was deleted so far counted in the result.
func RetentionRun(ctx context.Context, b RetentionBackend, params *RetentionSweepParams) (*RetentionSweepResult, error) {
	batch := params.BatchSize
	if batch <= 0 {
		batch = RetentionBatchDefault
	}
	res := &RetentionSweepResult{}
	cut := params.Cutoffs()
	// drain runs a delete step until a batch comes back short: nothing
	// due is left.
	drain := func(before time.Time, count *int, step func(before time.Time) (int, error)) error {
		if before.IsZero() {
			return nil
		}
		for {
			n, err := step(before)
			if err != nil {
				return err
			}
			*count += n
			if n < batch {
				return nil
			}
		}
	}
	deliveries := func(states ...herald.DeliveryState) func(time.Time) (int, error) {
		return func(before time.Time) (int, error) {
			return b.RetentionDeliveryDelete(ctx, &RetentionDeliveryDeleteParams{States: states, Before: before, Limit: batch})
		}
	}
	if err := drain(cut.Delivered, &res.Deliveries, deliveries(RetentionStates...)); err != nil {
		return res, err
	}
	if err := drain(cut.Dead, &res.Dead, deliveries(herald.DeliveryDead)); err != nil {
		return res, err
	}
	err := drain(cut.Events, &res.Events, func(before time.Time) (int, error) {
		return b.RetentionEventDelete(ctx, &RetentionEventDeleteParams{Before: before, Limit: batch})
	})
	if err != nil {
		return res, err
	}
	cursors := b.RetentionCursors()
	res.Keys, err = cursors.Keys.Scan(ctx, batch, func(ctx context.Context, after []string, limit int) ([]string, int, int, error) {
		r, err := b.RetentionKeyScan(ctx, &RetentionKeyScanParams{After: after, Limit: limit, IdleBefore: cut.Keys, Now: params.Now})
		return scanned(r, err)
	})
	if err != nil {
		return res, err
	}
	err = drain(cut.Secrets, &res.Secrets, func(before time.Time) (int, error) {
		return b.RetentionSecretDelete(ctx, &RetentionSecretDeleteParams{Before: before, Limit: batch})
	})
	if err != nil {
		return res, err
	}
	err = drain(cut.Subscriptions, &res.Subscriptions, func(before time.Time) (int, error) {
		return b.RetentionSubscriptionDelete(ctx, &RetentionSubscriptionDeleteParams{Before: before, Limit: batch})
	})
	if err != nil {
		return res, err
	}
	res.Attempts, err = cursors.Attempts.Scan(ctx, batch, func(ctx context.Context, after []string, limit int) ([]string, int, int, error) {
		r, err := b.RetentionAttemptScan(ctx, &RetentionAttemptScanParams{After: after, Limit: limit})
		return scanned(r, err)
	})
	return res, err
}

// scanned unpacks a scan step's result for SweepCursor.Scan.
func scanned(r *RetentionScanResult, err error) ([]string, int, int, error) {
	if r == nil {
		return nil, 0, 0, err
	}
	return r.Last, r.Examined, r.Deleted, err
}
