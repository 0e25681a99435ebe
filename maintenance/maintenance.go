package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Defaults.
const (
	DefaultLeaderInterval = 5 * time.Second
	DefaultSweepInterval  = time.Minute
	DefaultSweepBatch     = 1000
	// DefaultVacuumInterval is how often the leader vacuums the queue
	// tables of a store that needs it (PostgreSQL). At 1,000 deliveries/s
	// that is ~20,000 dead row versions per run, a few tens of
	// milliseconds of work on a table of a few hundred live rows.
	DefaultVacuumInterval = 10 * time.Second
	// maxStaleCheckInterval caps how often staleness is checked when the
	// threshold is long.
	maxStaleCheckInterval = 30 * time.Second
)

// Publisher publishes herald's own events through the normal pipeline
// (ingest's fan-out), so subscriptions to herald.queue.stale receive them.
// *ingest.Ingester implements it.
type Publisher interface {
	PublishMany(ctx context.Context, events []*herald.Event) ([]store.EventInsertResult, error)
}

// Observer receives maintenance measurements; package metrics implements
// it. Optional.
type Observer interface {
	ObserveStaleAlarm(tier int)
	ObserveRetention(r *store.RetentionSweepResult)
	ObserveVacuum(d time.Duration, err error)
}

// Retention is how long finished rows are kept (zero or less: for ever).
type Retention struct {
	// Delivered applies to delivered, skipped, superseded and cancelled
	// deliveries (and their attempts).
	Delivered time.Duration
	// Dead applies to dead letters.
	Dead time.Duration
	// Events applies to events with no delivery left.
	Events time.Duration
}

// Config configures a Maintainer.
type Config struct {
	Store store.Store
	// Publisher raises herald.queue.stale; nil disables the alarm.
	Publisher Publisher
	// Tiers is the number of configured retry tiers.
	Tiers int
	// StaleAfter is the staleness threshold: tier i is stale when its
	// oldest due pending delivery has waited longer. It is also the
	// shortest gap between two alarms for one tier. 0 disables the alarm.
	StaleAfter time.Duration
	// StaleCheckInterval is how often staleness is checked (default
	// StaleAfter/5, at least 1s, at most 30s).
	StaleCheckInterval time.Duration
	Retention          Retention
	// SweepInterval is how often the retention sweeper runs, and the
	// sweep of deliveries of deleted subscriptions (default 1m).
	SweepInterval time.Duration
	// SweepBatch caps rows per delete transaction (default 1000).
	SweepBatch int
	// VacuumInterval is how often the leader runs the store's
	// QueueVacuum, when the store implements store.Vacuumer; 0 never
	// (main passes DefaultVacuumInterval unless told otherwise).
	VacuumInterval time.Duration
	// PushIdleExpiry drops Web Push user agents that have not connected
	// for this long (0: never); main passes DefaultPushIdleExpiry unless
	// told otherwise. Expired push messages are swept regardless.
	PushIdleExpiry time.Duration
	// LeaderInterval is how often leadership is attempted or confirmed
	// (default 5s).
	LeaderInterval time.Duration
	Observer       Observer
	Now            func() time.Time
	Logger         *slog.Logger
}

// Maintainer runs the leader election, the staleness alarm and the
// retention sweeper.
type Maintainer struct {
	cfg    Config
	leader atomic.Bool

	mu        sync.Mutex
	lastAlarm map[int]time.Time // per tier, while it stays stale

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Maintainer; call Start.
func New(cfg Config) *Maintainer {
	if cfg.LeaderInterval <= 0 {
		cfg.LeaderInterval = DefaultLeaderInterval
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.SweepBatch <= 0 {
		cfg.SweepBatch = DefaultSweepBatch
	}
	if cfg.StaleCheckInterval <= 0 {
		cfg.StaleCheckInterval = min(max(cfg.StaleAfter/5, time.Second), maxStaleCheckInterval)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Maintainer{cfg: cfg, lastAlarm: map[int]time.Time{}}
}

// IsLeader reports whether this node was leader at the last attempt.
func (m *Maintainer) IsLeader() bool { return m.leader.Load() }

// Start runs the services until Stop.
func (m *Maintainer) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
	m.elect(ectx)
	ecancel()
	m.run(ctx, m.cfg.LeaderInterval, m.elect)
	if m.cfg.StaleAfter > 0 && m.cfg.Publisher != nil {
		m.run(ctx, m.cfg.StaleCheckInterval, func(ctx context.Context) {
			if !m.IsLeader() {
				return
			}
			if err := m.CheckStale(ctx); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("queue staleness check failed", "err", err)
			}
		})
	}
	// Once at start on every node, leader or not: a node killed between
	// the two transactions of a subscription delete (store/postgres
	// SubscriptionDelete) left deliveries no claim takes, and the leader's
	// sweep would come only after a leader lease and a SweepInterval. The
	// statement is set-based and idempotent, so nodes starting together
	// do no harm.
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if _, err := m.CancelOrphaned(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("orphan sweep at start failed", "err", err)
		}
	}()
	m.run(ctx, m.cfg.SweepInterval, func(ctx context.Context) {
		if !m.IsLeader() {
			return
		}
		if _, err := m.CancelOrphaned(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("orphan sweep failed", "err", err)
		}
	})
	r := m.cfg.Retention
	if r.Delivered > 0 || r.Dead > 0 || r.Events > 0 {
		m.run(ctx, m.cfg.SweepInterval, func(ctx context.Context) {
			if !m.IsLeader() {
				return
			}
			res, err := m.Sweep(ctx)
			if err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("retention sweep failed", "err", err)
			}
			if res != nil && res.Deliveries+res.Dead+res.Events > 0 {
				// Here, on the sweeper's goroutine: it may take long, and
				// the queue vacuums go on meanwhile.
				m.vacuumArchive(ctx)
			}
		})
	}
	if ps, ok := m.cfg.Store.(store.PushStore); ok {
		m.run(ctx, m.cfg.SweepInterval, func(ctx context.Context) {
			if !m.IsLeader() {
				return
			}
			if _, err := m.SweepPush(ctx, ps); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("push retention sweep failed", "err", err)
			}
		})
	}
	if v, ok := m.cfg.Store.(store.Vacuumer); ok && m.cfg.VacuumInterval > 0 {
		m.run(ctx, m.cfg.VacuumInterval, func(ctx context.Context) {
			if !m.IsLeader() {
				return
			}
			if err := m.Vacuum(ctx, v); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("queue vacuum failed", "err", err)
			}
		})
	}
}

// Stop ends the services and gives up leadership.
func (m *Maintainer) Stop() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if m.leader.Swap(false) {
		if err := m.cfg.Store.LeaderRelease(ctx); err != nil {
			m.cfg.Logger.Warn("could not release leadership; it ends with the connection", "err", err)
		}
	}
}

func (m *Maintainer) run(ctx context.Context, every time.Duration, fn func(ctx context.Context)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				fn(ctx)
			}
		}
	}()
}

// elect attempts or confirms leadership.
func (m *Maintainer) elect(ctx context.Context) {
	ok, err := m.cfg.Store.LeaderAttempt(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.cfg.Logger.Warn("leader election failed; not leading", "err", err)
		}
		ok = false
	}
	if was := m.leader.Swap(ok); was != ok {
		if ok {
			m.cfg.Logger.Info("this node now leads maintenance (retention, staleness alarms)")
		} else {
			m.cfg.Logger.Info("this node no longer leads maintenance")
		}
	}
}
