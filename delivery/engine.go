package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// Sender makes one HTTP attempt; *webhook.Sender implements it.
type Sender interface {
	Send(ctx context.Context, r *webhook.Request) webhook.Result
}

// Router routes herald's own events to the subscriptions they match;
// *ingest.Fanout implements it (delivery and ingest are siblings, joined in
// cmd/herald).
type Router interface {
	// Refresh brings the routes up to the store's current subscriptions.
	Refresh(ctx context.Context) error
	// Inserts builds the store inserts for events, one pending tier-0
	// delivery per matching subscription.
	Inserts(events []*herald.Event, now time.Time, tier0Delay time.Duration) []store.EventInsert
	// DropUnreceived removes the system events without a delivery (no
	// subscription receives them: they are not stored) and returns their
	// types, for CountDropped once the rest is stored.
	DropUnreceived(inserts []store.EventInsert) ([]store.EventInsert, []string)
	// CountDropped counts system events DropUnreceived removed.
	CountDropped(types []string)
}

// Defaults.
const (
	DefaultWorkers            = 64
	DefaultClaimBatch         = 100
	DefaultLeaseMargin        = 30 * time.Second
	DefaultPollInterval       = time.Second
	DefaultRescueInterval     = 5 * time.Second
	DefaultLivenessInterval   = time.Second
	DefaultRebalanceInterval  = time.Second
	DefaultShutdownTimeout    = 10 * time.Second
	DefaultCompleteBatch      = 500
	DefaultCompleteWait       = 3 * time.Millisecond
	DefaultSteadyCompleteWait = 40 * time.Millisecond
)

// Config configures an Engine.
type Config struct {
	Store  store.Store
	Sender Sender
	// Fanout routes herald's own events (dead letters, disabled
	// subscriptions); nil disables them.
	Fanout Router
	Tiers  Tiers
	// Workers is the number of concurrent requests (default 64).
	Workers int
	// ClaimBatch caps one claim (default 100); a claim never asks for more
	// than the tier's free slots.
	ClaimBatch int
	// LeaseMargin is added to a delivery's timeout to size its lease
	// (default 30s): long enough to record the outcome after the request.
	LeaseMargin time.Duration
	// PollInterval is the longest a tier sleeps without checking the
	// store (default 1s): it bounds how late work published on another
	// node is seen.
	PollInterval time.Duration
	// IdlePollInterval is how often a tier with nothing pending at all
	// checks the store (default 10×PollInterval): after each empty check
	// the wait doubles from PollInterval up to it. New work does not wait
	// for it: local commits and completions wake the tier, and other
	// nodes' through LISTEN/NOTIFY (which wakes every tier whenever it
	// reconnects); the check is the fallback for a notification lost.
	// Without it an idle node ran a claim and a next-due query per tier
	// per PollInterval — 18 statements a second with the default nine
	// tiers, PostgreSQL's largest idle cost (issue 26).
	IdlePollInterval time.Duration
	// RescueInterval is how often expired leases are rescued (default 5s):
	// the fallback for a node that is alive but stuck.
	RescueInterval time.Duration
	// LivenessInterval is how often the leases of dead nodes are rescued
	// (default 1s; store.Store.DeliveryRescueDead, store/liveness.go): it
	// bounds, with the time the database takes to see a node die, how
	// late a crashed node's work resumes. On PostgreSQL each call is a
	// ping and one statement over the registered nodes (herald_nodes);
	// on SQLite it does nothing.
	LivenessInterval time.Duration
	// RebalanceInterval is how often workers are reassigned across tiers
	// by backlog (default 1s).
	RebalanceInterval time.Duration
	// ShutdownTimeout bounds how long Stop waits for running requests
	// (default 10s); requests still running then are cancelled and their
	// deliveries released without an attempt.
	ShutdownTimeout time.Duration
	// CompleteBatch caps outcomes per completion transaction (default 500).
	CompleteBatch int
	// CompleteWait is how long a completion transaction waits for more
	// outcomes while other requests are running (default 3ms; negative:
	// never). An outcome that frees an ordered key or a max_in_flight slot
	// is written at once.
	CompleteWait time.Duration
	// SteadyCompleteWait is how long a completion transaction waits for
	// more outcomes in a steady flow of them, even with no other request
	// running (default 40ms; negative: never; completer.gather). Outcomes
	// are written that much later — the deliveries were already made —
	// and a crash in between repeats at most those deliveries. 40ms, not
	// ADR 0026's 10ms: at 200 deliveries/s 10ms gathered 2.7 outcomes per
	// transaction and each transaction cost PostgreSQL about 0.8 ms of
	// CPU (docs/benchmarks.md, "Issue 26", 2026-12-02).
	SteadyCompleteWait time.Duration
	// NodeID names this node's leases (default random).
	NodeID string
	Now    func() time.Time
	Logger *slog.Logger
	// Seed seeds the worker assignment's random choice (0 = random).
	Seed uint64
	// Observer receives attempt and completion measurements (default
	// NopObserver).
	Observer Observer
	// AutoDisable is the auto-disable rule of subscriptions without their
	// own (delivery/health.go). nil: herald.DefaultAutoDisableFailures
	// over herald.DefaultAutoDisableAfter; ConsecutiveFailures 0: no
	// subscription is ever auto-disabled, whatever its own rule.
	AutoDisable *herald.AutoDisable
}

// Engine claims and delivers.
type Engine struct {
	cfg   Config
	tiers []*tierRunner
	rnd   *mrand.Rand

	claimCtx   context.Context // cancelled to stop claiming
	stopClaim  context.CancelFunc
	sendCtx    context.Context // cancelled to abort running requests
	abortSends context.CancelFunc
	loops      sync.WaitGroup // tier loops, rescuer, rebalancer
	work       sync.WaitGroup // running requests
	completer  *completer
	releasedMu sync.Mutex
	released   []string
	// dispatchMu orders direct-dispatch reservations (read side) against
	// Stop (write side), so no reservation joins work after Stop waits.
	dispatchMu  sync.RWMutex
	started     atomic.Bool
	stopOnce    sync.Once
	inflightAll atomic.Int64
}

type tierRunner struct {
	tier int
	// rotate is the subscription served last (claim round-robin); only
	// the tier's loop touches it.
	rotate string
	// slots is the number of workers (concurrent requests) the tier has.
	slots atomic.Int64
	// inflight counts the deliveries the tier holds: requests running,
	// deliveries claimed and queued for a worker, and room reserved for a
	// claim or a direct dispatch in progress. reserve keeps it <= capacity.
	inflight atomic.Int64
	// gen is bumped by notify (work was committed to the tier). drained
	// says the tier's loop is keeping up: its last claim found less than
	// it had room for, and since then no notified work has waited for
	// room. While drained, the loop claims only when notified, at the
	// next due time or after PollInterval (not on every freed slot), and
	// direct dispatch may start fresh work without a claim: there is no
	// backlog for it to overtake.
	gen     atomic.Uint64
	drained atomic.Bool
	wake    chan struct{}

	// The run queue (see runqueue.go): claimed deliveries waiting for a
	// worker, so that a claim can take more than the free workers and a
	// freed worker starts the next delivery without a claim.
	mu      sync.Mutex
	running int64     // worker goroutines
	urgent  []job     // deliveries whose start is bounded: started first (startBound)
	queue   fairQueue // the rest, round-robin over subscriptions (fairqueue.go)
}

// signal wakes the tier's loop (a slot freed or slots grew).
func (t *tierRunner) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// notify says work may have been committed to the tier: the loop claims.
func (t *tierRunner) notify() {
	t.gen.Add(1)
	t.signal()
}

// capacity is how many deliveries the tier may hold: one per worker plus
// a run queue as long again (see runqueue.go).
func (t *tierRunner) capacity() int64 { return 2 * t.slots.Load() }

// room is how many more deliveries the tier may take now.
func (t *tierRunner) room() int64 { return t.capacity() - t.inflight.Load() }

// reserve takes up to n of the tier's room and returns how many it took.
func (t *tierRunner) reserve(n int64) int64 {
	for {
		in := t.inflight.Load()
		take := min(n, t.capacity()-in)
		if take <= 0 {
			return 0
		}
		if t.inflight.CompareAndSwap(in, in+take) {
			return take
		}
	}
}

// New returns an Engine; call Start.
func New(cfg Config) *Engine {
	if len(cfg.Tiers) == 0 {
		cfg.Tiers = DefaultTiers
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.ClaimBatch <= 0 {
		cfg.ClaimBatch = DefaultClaimBatch
	}
	if cfg.LeaseMargin <= 0 {
		cfg.LeaseMargin = DefaultLeaseMargin
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.IdlePollInterval < cfg.PollInterval {
		cfg.IdlePollInterval = 10 * cfg.PollInterval
	}
	if cfg.RescueInterval <= 0 {
		cfg.RescueInterval = DefaultRescueInterval
	}
	if cfg.LivenessInterval <= 0 {
		cfg.LivenessInterval = DefaultLivenessInterval
	}
	if cfg.RebalanceInterval <= 0 {
		cfg.RebalanceInterval = DefaultRebalanceInterval
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.CompleteBatch <= 0 {
		cfg.CompleteBatch = DefaultCompleteBatch
	}
	if cfg.CompleteWait == 0 {
		cfg.CompleteWait = DefaultCompleteWait
	}
	if cfg.SteadyCompleteWait == 0 {
		cfg.SteadyCompleteWait = DefaultSteadyCompleteWait
	}
	if cfg.NodeID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		cfg.NodeID = "node_" + hex.EncodeToString(b[:])
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	e := &Engine{cfg: cfg, rnd: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := range cfg.Tiers {
		e.tiers = append(e.tiers, &tierRunner{tier: i, wake: make(chan struct{}, 1)})
	}
	e.applyAssignment(AssignWorkers(cfg.Workers, e.weights(make([]int64, len(cfg.Tiers))), e.rnd))
	e.completer = newCompleter(e)
	return e
}

// NodeID is the lease owner name of this engine.
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// Tiers returns the configured tiers.
func (e *Engine) Tiers() Tiers { return e.cfg.Tiers }

// Notify wakes the tier loops (new or redriven work was committed).
func (e *Engine) Notify() { e.NotifyTiers(store.AllTiers) }

// NotifyTiers wakes the loops of the tiers in mask (store.TierBit): work
// was committed to them. A woken loop claims, so a tier woken for work of
// another costs an empty claim: a saturated PostgreSQL node whose every
// commit woke all nine default tiers ran thousands of them a second
// (docs/benchmarks.md, "two speeds").
func (e *Engine) NotifyTiers(mask uint64) {
	for _, t := range e.tiers {
		if store.TierIn(mask, t.tier) {
			t.notify()
		}
	}
}

// Start runs the tier loops, the rebalancer, the rescuer and the completer.
func (e *Engine) Start() {
	if !e.started.CompareAndSwap(false, true) {
		return
	}
	e.claimCtx, e.stopClaim = context.WithCancel(context.Background())
	e.sendCtx, e.abortSends = context.WithCancel(context.Background())
	e.completer.start()
	for _, t := range e.tiers {
		e.loops.Add(1)
		go e.tierLoop(t)
	}
	e.loops.Add(3)
	go e.every(e.cfg.RebalanceInterval, e.rebalance)
	go e.every(e.cfg.RescueInterval, e.rescue)
	go e.every(e.cfg.LivenessInterval, e.rescueDead)
}

// Stop stops claiming, waits up to ShutdownTimeout for running requests,
// cancels the rest, releases their deliveries and flushes outcomes.
func (e *Engine) Stop() {
	if !e.started.Load() {
		return
	}
	e.stopOnce.Do(func() {
		e.stopClaim()
		// Barrier: reservations that saw the engine running have joined
		// e.work; later ones see claimCtx cancelled and reserve nothing.
		e.dispatchMu.Lock()
		e.dispatchMu.Unlock() //nolint:staticcheck // empty critical section is the barrier
		e.loops.Wait()
		e.releaseQueued()
		done := make(chan struct{})
		go func() { e.work.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(e.cfg.ShutdownTimeout):
			e.abortSends()
			<-done
		}
		e.abortSends()
		e.completer.stop()
		e.releasedMu.Lock()
		ids := e.released
		e.releasedMu.Unlock()
		if len(ids) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n, err := e.cfg.Store.DeliveryRelease(ctx, &store.DeliveryReleaseParams{
				IDs: ids, LeaseOwner: e.cfg.NodeID, Now: e.now(),
			})
			if err != nil {
				e.cfg.Logger.Warn("could not release deliveries; their leases will expire", "count", len(ids), "err", err)
			} else {
				e.cfg.Logger.Info("released deliveries on shutdown", "count", n)
			}
		}
	})
}

func (e *Engine) now() time.Time { return e.cfg.Now().UTC().Truncate(time.Millisecond) }

func (e *Engine) applyAssignment(counts []int) {
	for i, t := range e.tiers {
		old := t.slots.Swap(int64(counts[i]))
		if int64(counts[i]) > old {
			t.signal()
		}
	}
}

func (e *Engine) every(d time.Duration, fn func(ctx context.Context)) {
	defer e.loops.Done()
	tk := time.NewTicker(d)
	defer tk.Stop()
	for {
		select {
		case <-e.claimCtx.Done():
			return
		case <-tk.C:
			fn(e.claimCtx)
		}
	}
}

func (e *Engine) rebalance(ctx context.Context) {
	st, err := e.cfg.Store.StatsGet(ctx, &store.StatsGetParams{Tiers: len(e.tiers), Now: e.now()})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("worker rebalance: stats unavailable", "err", err)
		}
		return
	}
	// A tier's weight is its due backlog plus this node's requests running
	// in it: work that arrives by direct dispatch is never "due" in the
	// store, yet tier 0 needs the workers it keeps busy. Due counts only
	// work a claim can take (store.TierStats): a backlog of a disabled,
	// paused or out-of-budget subscription draws no workers.
	backlog := make([]int64, len(e.tiers))
	for _, ts := range st.Tiers {
		if ts.Tier < len(backlog) {
			backlog[ts.Tier] = ts.Due
		}
	}
	for i, t := range e.tiers {
		backlog[i] += max(t.inflight.Load(), 0)
	}
	e.applyAssignment(AssignWorkers(e.cfg.Workers, e.weights(backlog), e.rnd))
}

// weights turns per-tier work into AssignWorkers weights: tier 0 also gets
// a standing weight of Workers, because fresh work arrives there without
// notice. Without it an idle node spreads its workers evenly (a ninth in
// tier 0 with the default tiers), and a burst after a quiet spell — or
// right after start — overflows tier 0 into claims for a whole
// RebalanceInterval (measured: the first second at 1,000 events/s had a
// p99 of 600 ms against 12–20 ms after). A real retry backlog still
// outweighs it: 1,000 due retries leave tier 0 about 6% of the surplus.
func (e *Engine) weights(work []int64) []int64 {
	out := slices.Clone(work)
	out[0] += int64(e.cfg.Workers)
	return out
}

func (e *Engine) rescue(ctx context.Context) {
	e.rescueWith(ctx, "lease rescue failed", "rescued deliveries with expired leases",
		func() (int, error) {
			return e.cfg.Store.DeliveryRescue(ctx, &store.DeliveryRescueParams{Now: e.now()})
		})
}

// rescueDead makes the leases of dead nodes pending (store/liveness.go).
func (e *Engine) rescueDead(ctx context.Context) {
	e.rescueWith(ctx, "dead node rescue failed", "rescued deliveries of dead nodes",
		func() (int, error) {
			return e.cfg.Store.DeliveryRescueDead(ctx, &store.DeliveryRescueDeadParams{Now: e.now()})
		})
}

// rescueWith runs one rescue, logs what it made pending (or why it
// failed, unless the engine is stopping) and wakes the workers for it.
func (e *Engine) rescueWith(ctx context.Context, failed, rescued string, run func() (int, error)) {
	n, err := run()
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn(failed, "err", err)
		}
		return
	}
	if n > 0 {
		e.cfg.Logger.Info(rescued, "count", n)
		e.Notify()
	}
}

// tierLoop claims due work of one tier into free slots and sleeps until a
// slot frees (only while the tier is not drained), work is committed, the
// head of the tier matures, or PollInterval passes.
func (e *Engine) tierLoop(t *tierRunner) {
	defer e.loops.Done()
	backoff := time.Duration(0)
	var (
		recheck time.Time // when a drained tier is claimed again anyway
		seen    uint64    // gen when the last claim started
		wait    time.Duration
		empty   time.Duration // the wait after the last empty check (IdlePollInterval)
	)
	for {
		if e.claimCtx.Err() != nil {
			return
		}
		gen := t.gen.Load()
		if !t.drained.Load() || gen != seen || !e.cfg.Now().Before(recheck) {
			wait = e.cfg.PollInterval
			want := int64(e.cfg.ClaimBatch)
			if t.drained.Load() {
				// Keeping up, claiming only what was notified (or the
				// periodic check): leave half the room to direct dispatch
				// meanwhile, or every publish that commits during this
				// claim would find none and wait for the next claim.
				want = min(want, max(1, t.room()/2))
			} else if !t.hungry() {
				// A backlog, and the run queue still feeds every worker:
				// claim once it is half empty, not on every freed worker.
				want = 0
			}
			e.pump(t)
			limit := t.reserve(want)
			if limit == 0 && want > 0 && gen != seen {
				// Notified work waits and every slot is taken: stop direct
				// dispatch from taking the next free slot before it.
				t.drained.Store(false)
				if t.room() > 0 {
					// A slot freed after reserve looked, by a worker that
					// still saw the tier drained and so did not signal
					// (attempt): claim now rather than at the poll.
					continue
				}
			}
			if limit > 0 {
				seen = gen
				n, next, err := e.claim(t, int(limit), gen)
				switch {
				case err != nil:
					if e.claimCtx.Err() != nil {
						return
					}
					t.drained.Store(false)
					backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
					e.cfg.Logger.Warn("claim failed; nothing claimed", "tier", t.tier, "retry_in", backoff, "err", err)
					wait = backoff
				case n == int(limit):
					backoff = 0
					t.drained.Store(false)
					continue // there may be more; claim again while slots are free
				default:
					backoff = 0
					if next != nil {
						wait = min(wait, max(next.Sub(e.cfg.Now()), time.Millisecond))
						empty = 0
					} else if n == 0 {
						// Nothing pending in the tier at all: check less
						// often while it stays so (IdlePollInterval).
						empty = min(max(2*empty, e.cfg.PollInterval), e.cfg.IdlePollInterval)
						wait = empty
					} else {
						empty = 0
					}
					// Nothing more is claimable: keeping up. Work notified
					// while claiming is claimed next round (gen moved).
					t.drained.Store(true)
				}
				recheck = e.cfg.Now().Add(wait)
			}
		} else {
			wait = max(recheck.Sub(e.cfg.Now()), time.Millisecond)
		}
		timer := time.NewTimer(wait)
		select {
		case <-e.claimCtx.Done():
			timer.Stop()
			return
		case <-t.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// claim claims up to limit deliveries and starts them. When it claims fewer
// than limit it also returns when the tier's next delivery matures, unless
// work was committed to the tier since gen (the tier's gen when the claim
// began): the loop then claims again at once, and the next due time would
// not be used.
//
// The caller reserved limit slots; claim gives back those it did not fill.
func (e *Engine) claim(t *tierRunner, limit int, gen uint64) (int, *time.Time, error) {
	now := e.now()
	// started is when the claim really started: the store reads it once it
	// holds its locks (the writer, throttle rows) and records rate-limited
	// starts at it, so lateness (releaseLate) is measured from there, not
	// from before the claim waited. The store calls Clock before it
	// returns, on this goroutine.
	started := now
	claimed, err := e.cfg.Store.DeliveryClaim(e.claimCtx, &store.DeliveryClaimParams{
		Tier:        t.tier,
		Limit:       limit,
		Now:         now,
		LeaseOwner:  e.cfg.NodeID,
		LeaseUntil:  now.Add(herald.DefaultTimeout + e.cfg.LeaseMargin),
		LeaseMargin: e.cfg.LeaseMargin,
		RotateAfter: t.rotate,
		Clock: func() time.Time {
			if at := e.now(); at.After(now) { // the store counts an earlier one as Now
				started = at
			}
			return started
		},
	})
	if err == nil {
		e.cfg.Observer.ObserveClaim(len(claimed))
	}
	if unused := limit - len(claimed); unused > 0 {
		t.inflight.Add(int64(-unused))
	}
	if err != nil {
		return 0, nil, err
	}
	t.rotate = nextRotation(t.rotate, claimed)
	jobs := make([]job, len(claimed))
	for i, c := range claimed {
		jobs[i] = job{c: c, at: started}
	}
	e.inflightAll.Add(int64(len(claimed)))
	e.work.Add(len(claimed))
	e.start(t, jobs)
	if len(claimed) == limit {
		return len(claimed), nil, nil
	}
	if t.gen.Load() != gen {
		// A node that cannot direct-dispatch claims after nearly every
		// commit, a few rows at a time: a next-due read after each claim
		// was as much of PostgreSQL's time as the claims (docs/benchmarks.md,
		// "a saturated PostgreSQL node has two speeds").
		return len(claimed), nil, nil
	}
	// NextDue accounts for throttled subscriptions (their budget's return,
	// not their due time), so a throttled backlog does not make this loop
	// spin.
	next, err := e.cfg.Store.DeliveryNextDue(e.claimCtx, &store.DeliveryNextDueParams{Tier: t.tier, Now: e.now()})
	if err != nil {
		return len(claimed), nil, nil // the poll interval covers it
	}
	return len(claimed), next, nil
}

func (e *Engine) attempt(t *tierRunner, c *store.ClaimedDelivery, claimedAt time.Time) {
	defer func() {
		t.inflight.Add(-1)
		e.inflightAll.Add(-1)
		e.work.Done()
		// A drained tier's loop does not claim for a freed slot (tierLoop),
		// so waking it would only rearm its timer: at steady rates that
		// was a wake-up of a second thread for every delivery (issue 26).
		// The loop looks at room again after it stops being drained, so a
		// slot freed meanwhile is not missed.
		if !t.drained.Load() {
			t.signal()
		}
	}()
	secrets := make([]string, 0, len(c.Secrets))
	unreadable := false
	for _, s := range c.Secrets {
		secrets = append(secrets, s.Value)
		unreadable = unreadable || s.Unreadable
	}
	if e.releaseLate(c, claimedAt) || e.staleLease(c) { // throttle.go, runqueue.go
		return
	}
	started := e.cfg.Now().UTC()
	if unreadable {
		// Nothing is sent: a request signed with fewer secrets than the
		// receiver expects might be refused, or accepted under a secret the
		// operator meant to retire. The attempt fails and retries through
		// the tiers (then dead-letters, redrivable once the key is fixed).
		res := webhook.Result{Class: herald.ErrorSecretUnreadable,
			Message: "a signing secret of the subscription could not be decrypted (wrong --encryption-key, or the row was altered); nothing was sent"}
		d := decide(e.cfg.Tiers, c, e.cfg.NodeID, started.Truncate(time.Millisecond), res, e.cfg.Now().UTC())
		e.completer.add(pending{decision: d, claimed: c, result: res})
		return
	}
	req := &webhook.Request{
		URL:            c.Subscription.URL,
		Method:         c.Subscription.Method,
		Headers:        c.Subscription.Headers,
		Body:           c.Event.Body(),
		MsgID:          c.Delivery.ID,
		Secrets:        secrets,
		Attempt:        c.Attempt,
		EventType:      c.Event.Type,
		SubscriptionID: c.Subscription.ID,
		Timeout:        c.Subscription.Timeout(),
		Timestamp:      started,
		Destination:    c.Subscription.Dest(),
		EventID:        c.Event.ID,
		EventKey:       c.Event.Key,
		Tenant:         c.Event.Tenant,
	}
	res := e.cfg.Sender.Send(e.sendCtx, req)
	if e.sendCtx.Err() != nil && !res.Success {
		// Aborted by shutdown: not a real attempt. Give it back.
		e.releasedMu.Lock()
		e.released = append(e.released, c.Delivery.ID)
		e.releasedMu.Unlock()
		return
	}
	d := decide(e.cfg.Tiers, c, e.cfg.NodeID, started.Truncate(time.Millisecond), res, e.cfg.Now().UTC())
	e.completer.add(pending{decision: d, claimed: c, result: res})
}

// Inflight reports the number of requests running on this node.
func (e *Engine) Inflight() int64 { return e.inflightAll.Load() }

// nextRotation returns the subscription a claim served last in round-robin
// order: among the subscriptions that got the most deliveries (the partial
// last round, if any), the one furthest after cursor in wrap-around id
// order. The next claim starts after it.
func nextRotation(cursor string, claimed []*store.ClaimedDelivery) string {
	if len(claimed) == 0 {
		return cursor
	}
	counts := map[string]int{}
	most := 0
	for _, c := range claimed {
		id := c.Delivery.SubscriptionID
		counts[id]++
		most = max(most, counts[id])
	}
	best, bestWrapped, found := cursor, false, false
	for id, n := range counts {
		if n != most {
			continue
		}
		wrapped := id <= cursor
		if !found || (wrapped && !bestWrapped) || (wrapped == bestWrapped && id > best) {
			best, bestWrapped, found = id, wrapped, true
		}
	}
	return best
}
