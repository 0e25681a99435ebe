package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// workChannel is the LISTEN/NOTIFY channel that wakes nodes. The payload
// is the schema, so deployments (or tests) sharing a database in different
// schemas do not wake one another.
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
}

// notifyWork wakes every node listening on this schema, debounced. Called
// after commits that created due work (new deliveries, retries, redrives,
// released or rescued leases).
func (s *Store) notifyWork() {
	w := &s.work
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
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// A lost notification only delays work until the next poll.
		_, _ = s.pool.Exec(ctx, "SELECT pg_notify($1, current_schema())", workChannel)
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
				s.notifyWork()
				return
			}
		}
	}
}

// Listen implements store.Notifier on a dedicated connection (LISTEN needs
// a session; it does not work through a transaction-pooling PgBouncer, where
// nodes fall back to polling).
func (s *Store) Listen(ctx context.Context, onWork func()) error {
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
func (s *Store) listenOnce(ctx context.Context, onWork func()) error {
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
	onWork()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == workChannel && n.Payload == schema {
			onWork()
		}
	}
}

// notifyIf notifies when cond holds.
func (s *Store) notifyIf(cond bool) {
	if cond {
		s.notifyWork()
	}
}

// notifyCompleted notifies when completions scheduled retries or inserted
// system events with deliveries.
func (s *Store) notifyCompleted(params *store.DeliveryCompleteManyParams) {
	for _, o := range params.Outcomes {
		if o.State == herald.DeliveryPending {
			s.notifyWork()
			return
		}
	}
	for _, e := range params.Events {
		if len(e.Deliveries) > 0 {
			s.notifyWork()
			return
		}
	}
}
