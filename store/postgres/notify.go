package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// workChannel is the LISTEN/NOTIFY channel that wakes nodes. The payload
// is "<schema> <tiers> <sender>": the schema, so deployments (or tests)
// sharing a database in different schemas do not wake one another; the
// tiers the work went to (store.TierBit, hexadecimal), so a node wakes
// only their loops; and the sending store's random tag, so a node skips
// its own notifications (it woke its loops itself). A payload of the
// schema alone (herald before 2026-12-04) wakes every tier.
const workChannel = "herald_work"

// Timing of notifications.
const (
	// notifyDebounce is the shortest gap between two notifications from one
	// node: a burst of commits sends one NOTIFY at its start and one at most
	// notifyDebounce later (River: one per queue per FetchCooldown; per-row
	// notifications cost too much at high insert rates).
	notifyDebounce = 15 * time.Millisecond
	// listenBackoffMax caps the wait between reconnection attempts.
	listenBackoffMax = 5 * time.Second
	// closeTimeout bounds closing a dedicated connection.
	closeTimeout = 5 * time.Second
)

var _ store.Notifier = (*Store)(nil)

// workNotifier sends debounced pg_notify calls from one goroutine, started
// on first use, so a commit never waits for its notification.
type workNotifier struct {
	once sync.Once
	kick chan struct{}
	done chan struct{}
	stop sync.Once
	wg   sync.WaitGroup
	// tiers gathers the tiers of the commits the next notification is
	// for (store.TierBit).
	tiers atomic.Uint64
	// tagOnce makes tag, this store's sender tag (workChannel).
	tagOnce sync.Once
	tag     string
}

// senderTag returns this store's tag in notifications (workChannel).
func (w *workNotifier) senderTag() string {
	w.tagOnce.Do(func() {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		w.tag = hex.EncodeToString(b[:])
	})
	return w.tag
}

// notifyWork wakes every other node listening on this schema, debounced,
// for work committed to tiers (store.TierBit). Called after commits that
// created due work (new deliveries, retries, redrives, released or
// rescued leases).
func (s *Store) notifyWork(tiers uint64) {
	w := &s.work
	w.tiers.Or(tiers)
	w.once.Do(func() {
		w.kick = make(chan struct{}, 1)
		w.done = make(chan struct{})
		if s.closed.Load() {
			return
		}
		w.wg.Add(1)
		go s.notifyLoop()
	})
	select {
	case w.kick <- struct{}{}:
	default: // a notification is already due: this commit rides on it
	}
}

func (s *Store) notifyLoop() {
	w := &s.work
	defer w.wg.Done()
	for {
		select {
		case <-w.done:
			return
		case <-w.kick:
		}
		tiers := w.tiers.Swap(0)
		if tiers == 0 {
			tiers = store.AllTiers // not expected: every caller names its tiers
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// A lost notification only delays work until the next poll.
		_, _ = s.pool.Exec(ctx, "SELECT pg_notify($1, current_schema() || $2)", workChannel,
			" "+strconv.FormatUint(tiers, 16)+" "+w.senderTag())
		cancel()
		t := time.NewTimer(notifyDebounce)
		select {
		case <-w.done:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (w *workNotifier) close() {
	w.once.Do(func() {}) // no loop may start after this
	w.stop.Do(func() {
		if w.done != nil {
			close(w.done)
		}
	})
	w.wg.Wait()
}

// notifyInserted notifies when an EventInsertMany stored new pending
// deliveries. Deliveries leased at insert (direct dispatch) are already
// being sent by their node: nobody needs waking for them.
func (s *Store) notifyInserted(events []store.EventInsert, res []store.EventInsertResult) {
	for i, r := range res {
		if r.Duplicate {
			continue
		}
		for _, d := range events[i].Deliveries {
			if d.LeaseOwner == "" {
				s.notifyWork(store.TierBit(0)) // inserted deliveries start in tier 0
				return
			}
		}
	}
}

// Listen implements store.Notifier on a dedicated connection (LISTEN needs
// a session; it does not work through a transaction-pooling PgBouncer, where
// nodes fall back to polling).
func (s *Store) Listen(ctx context.Context, onWork func(tiers uint64)) error {
	backoff := 100 * time.Millisecond
	for {
		err := s.listenOnce(ctx, onWork)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.closed.Load() {
			return errors.New("postgres: store closed")
		}
		_ = err // the caller polls meanwhile; reconnect with backoff
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context, onWork func(tiers uint64)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		_ = conn.Close(cctx)
		cancel()
	}()
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+workChannel); err != nil {
		return err
	}
	// Anything committed while we were not listening was not heard.
	onWork(store.AllTiers)
	own := s.work.senderTag()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel != workChannel {
			continue
		}
		if tiers, ok := workPayload(n.Payload, schema, own); ok {
			onWork(tiers)
		}
	}
}

// workPayload reads a notification's payload (workChannel): the tiers to
// wake, and false when it is for another schema or was sent by own.
func workPayload(payload, schema, own string) (uint64, bool) {
	if payload == schema {
		return store.AllTiers, true // a node from before tiers and tags
	}
	rest, ok := strings.CutPrefix(payload, schema+" ")
	if !ok {
		return 0, false
	}
	mask, sender, ok := strings.Cut(rest, " ")
	if !ok || sender == own || strings.Contains(sender, " ") {
		return 0, false
	}
	tiers, err := strconv.ParseUint(mask, 16, 64)
	if err != nil || tiers == 0 {
		return store.AllTiers, true // unreadable: wake everything rather than nothing
	}
	return tiers, true
}

// notifyIf notifies every tier when cond holds (the callers do not know
// which tiers their rows are in; they are rare: releases, rescues,
// redrives).
func (s *Store) notifyIf(cond bool) {
	if cond {
		s.notifyWork(store.AllTiers)
	}
}

// notifyCompleted notifies when completions scheduled retries or inserted
// system events with deliveries.
func (s *Store) notifyCompleted(params *store.DeliveryCompleteManyParams) {
	var tiers uint64
	for _, o := range params.Outcomes {
		if o.State == herald.DeliveryPending {
			tiers |= store.TierBit(o.Tier)
		}
	}
	for _, e := range params.Events {
		if len(e.Deliveries) > 0 {
			tiers |= store.TierBit(0)
			break
		}
	}
	if tiers != 0 {
		s.notifyWork(tiers)
	}
}
