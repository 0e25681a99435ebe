package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Defaults.
const (
	// DefaultMaxBatch caps the events of one group commit.
	DefaultMaxBatch = 1000
	// DefaultCommitters is the number of concurrent committers. SQLite has
	// one writer, so more gain nothing there; PostgreSQL commits in parallel.
	DefaultCommitters = 1
	// DefaultBusyWait is how long a group commit waits for more events
	// when the one before it held at least busyGroup events.
	DefaultBusyWait = 2 * time.Millisecond
	// DefaultSteadyWait is how long a group waits for more events when
	// group commits follow each other closely (Config.SteadyWait).
	DefaultSteadyWait = 2 * time.Millisecond
	// busyGroup is the group size that says publishers are queueing.
	busyGroup = 8
	// DefaultBatchYield is how long after a single publish batch publishes
	// still commit one at a time (Config.BatchYield).
	DefaultBatchYield = time.Second
)

// Config configures an Ingester.
type Config struct {
	Store store.Store
	// Fanout is the subscription matcher (default a new one on Store).
	Fanout *Fanout
	// Tier0Delay is the maturity delay of tier 0 (normally 0).
	Tier0Delay time.Duration
	// MaxBatch caps events per group commit (default DefaultMaxBatch).
	MaxBatch int
	// FlushInterval is how long a batch waits for more events after its
	// first one. 0 (the default) flushes as soon as the committer is free:
	// events that arrive during a commit form the next batch.
	FlushInterval time.Duration
	// BusyWait applies when FlushInterval is 0: while publishers queue
	// (the previous group commit held at least 8 events), a group waits up
	// to this long for more before it commits (default DefaultBusyWait;
	// negative: never). Each commit has a fixed cost (on SQLite a WAL
	// write and an fsync), so under load fewer, larger commits cost less
	// per event: measured 40% fewer commits and about 9% less node CPU per
	// delivery (docs/benchmarks.md). A lone publish never waits: after a
	// small group the next commits at once.
	BusyWait time.Duration
	// SteadyWait applies when FlushInterval is 0 and BusyWait did not:
	// while group commits follow each other closely (this group's first
	// event came less than 2×SteadyWait after the previous group's), a
	// group waits up to SteadyWait for more (default DefaultSteadyWait;
	// negative: never). At steady rates of about 1,000 events/s each
	// publish was otherwise a commit of its own (measured: 1.1–1.5 events
	// per commit, issue 26), paying the commit's fixed cost per event;
	// below about 250 commits/s nothing waits. 2ms and 2×, not ADR 0026's
	// 1ms and 4×: at 1,000/s 1ms gathered about one more event, and at
	// 200/s (5ms apart) a 2ms wait under 4× delayed every publish by 2ms
	// and gathered nothing (docs/benchmarks.md, "Issue 26", 2026-12-02).
	SteadyWait time.Duration
	// BatchYield: while a single publish (PublishOne) came within this
	// long, batch publishes (PublishMany: the batch API and broker
	// sources) commit one at a time, so an import of many batches cannot
	// fill every group commit and every core ahead of the single
	// publishes (issue 28: a 20,000-event burst through 8 batch callers
	// put 400–800 events in each group commit and a steady stream's
	// publishes waited behind two of them). The batches still arrive
	// faster than a node delivers them; with no single publish within the
	// window, batches commit side by side as before (the batch ingest
	// ceiling is unchanged). Default DefaultBatchYield; negative: never.
	BatchYield time.Duration
	// Committers is the number of concurrent group committers.
	Committers int
	// OnCommit is called after each commit that created pending
	// deliveries (wakes the delivery workers in this process).
	OnCommit func()
	// Dispatcher, when set, lets fresh deliveries skip the claim: they are
	// inserted leased to this node and started right after the commit
	// (direct dispatch; *delivery.Engine implements it). nil: every
	// delivery is inserted pending and claimed.
	Dispatcher Dispatcher
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// Observer receives publish and commit measurements (default
	// NopObserver).
	Observer Observer
}

// Dispatcher starts fresh deliveries on this node without a claim. Each
// commit reserves slots, inserts that many deliveries leased to
// DispatchLease's owner, then starts the committed ones and cancels the
// rest of its reservation.
type Dispatcher interface {
	// DispatchReserve reserves up to n slots and returns how many.
	DispatchReserve(n int) int
	// DispatchLease is the lease owner and end for a delivery of sub
	// inserted at now.
	DispatchLease(sub *herald.Subscription, now time.Time) (owner string, until time.Time)
	// DispatchStart sends committed leased deliveries (one reservation
	// each).
	DispatchStart(ds []*store.ClaimedDelivery, now time.Time)
	// DispatchCancel returns n unused reservations.
	DispatchCancel(n int)
}

// Ingester publishes events durably.
type Ingester struct {
	cfg    Config
	fanout *Fanout
	reqs   chan *request
	wg     sync.WaitGroup
	once   sync.Once
	// Closing protocol. Close closes closing (waking enqueues blocked on a
	// full queue), then takes closeMu, which waits for every enqueue in
	// progress (each holds the read side from its closing check to its
	// send), then closes stop: the committers drain reqs and exit. So no
	// request is queued after the committers' last look at reqs.
	closeMu sync.RWMutex
	closing chan struct{}
	stop    chan struct{}
	started atomic.Bool
	// gathering is held by the committer gathering the next group, from
	// its wait for a first request until the group is complete; it
	// commits after letting go, so one committer's commit overlaps the
	// next one's gathering, but two never gather at once. Gathering side
	// by side, each took every other publish: at 1,000 events/s the
	// steady wait (SteadyWait) was defeated — the other committer took
	// the events it waited for — and each committer's own groups came
	// twice as far apart as the flow's, too far to count as steady
	// (docs/benchmarks.md, "Issue 26", 2026-12-02). last and prev are the
	// flow's, read and written only under gathering: the size of the
	// previous group commit and when its first event came.
	gathering sync.Mutex
	last      int
	prev      time.Time
	// lastOne is when the last single publish came (UnixNano), and
	// batchTurn the one batch that commits while singles are recent
	// (Config.BatchYield).
	lastOne   atomic.Int64
	batchTurn chan struct{}
}

// request is one publish call's events: one for PublishOne, a batch for
// PublishMany. A group commit holds whole requests, so a batch is never
// split across transactions.
type request struct {
	evs []*herald.Event
	// token, when set, is the API token the insert must confirm
	// (store.WithTokenCheck, EventInsertManyParams.Tokens).
	token *store.TokenCheck
	res   []store.EventInsertResult
	err   error
	done  chan struct{}
}

// ErrClosed is returned by Publish after Close. It carries
// CodeStoreUnavailable so the API answers 503: the node is shutting down and
// the client should retry elsewhere or later.
var ErrClosed = &herald.Error{Code: herald.CodeStoreUnavailable, Message: "herald is shutting down"}

// New returns an Ingester; call Start to run its committers.
func New(cfg Config) *Ingester {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Committers <= 0 {
		cfg.Committers = DefaultCommitters
	}
	if cfg.BusyWait == 0 {
		cfg.BusyWait = DefaultBusyWait
	}
	if cfg.SteadyWait == 0 {
		cfg.SteadyWait = DefaultSteadyWait
	}
	if cfg.BatchYield == 0 {
		cfg.BatchYield = DefaultBatchYield
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
	fanout := cfg.Fanout
	if fanout == nil {
		fanout = NewFanout(cfg.Store, cfg.Logger)
	}
	return &Ingester{
		batchTurn: make(chan struct{}, 1),
		cfg:       cfg,
		fanout:    fanout,
		reqs:      make(chan *request, cfg.MaxBatch*cfg.Committers),
		closing:   make(chan struct{}),
		stop:      make(chan struct{}),
	}
}

// Fanout exposes the subscription matcher (the delivery engine uses it to
// route system events).
func (i *Ingester) Fanout() *Fanout { return i.fanout }

// Start runs the committers until Close.
func (i *Ingester) Start() {
	i.started.Store(true)
	for n := 0; n < i.cfg.Committers; n++ {
		i.wg.Add(1)
		go i.committer()
	}
}

// Close stops accepting events, commits what was queued and waits. Every
// PublishOne that queued its event is answered; the others get ErrClosed.
func (i *Ingester) Close() {
	i.once.Do(func() {
		close(i.closing)
		i.closeMu.Lock()
		i.closeMu.Unlock() //nolint:staticcheck // empty critical section: waits out enqueues in progress
		close(i.stop)
	})
	i.wg.Wait()
	// Left over only when Start was never called: nobody will commit it.
	for {
		select {
		case r := <-i.reqs:
			r.err = ErrClosed
			close(r.done)
		default:
			return
		}
	}
}

// PublishOne stores one event through group commit and returns once its
// batch committed.
func (i *Ingester) PublishOne(ctx context.Context, ev *herald.Event) (store.EventInsertResult, error) {
	start := time.Now()
	if i.cfg.BatchYield > 0 {
		i.lastOne.Store(start.UnixNano())
	}
	r := &request{evs: []*herald.Event{ev}, token: tokenOf(ctx), done: make(chan struct{})}
	if err := i.enqueue(ctx, r); err != nil {
		return store.EventInsertResult{}, err
	}
	// Once queued, wait for the outcome even if ctx ends: the caller may
	// have gone, but the answer must not be sent before the commit.
	<-r.done
	i.cfg.Observer.ObservePublish(time.Since(start), r.err)
	if r.err != nil {
		return store.EventInsertResult{}, r.err
	}
	return r.res[0], nil
}

// enqueue queues r for a committer, or says why not (ErrClosed, ctx's
// error). See the closing protocol on Ingester.
func (i *Ingester) enqueue(ctx context.Context, r *request) error {
	i.closeMu.RLock()
	defer i.closeMu.RUnlock()
	select {
	case <-i.closing:
		return ErrClosed
	default:
	}
	select {
	case i.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-i.closing:
		// The queue is full and Close waits for this enqueue to end.
		return ErrClosed
	}
}

// PublishMany stores events and their deliveries in one transaction (the
// batch API). Results are in input order.
//
// Once the committers run, the batch joins the group commit like a single
// publish: concurrent batches share a transaction up to MaxBatch events
// (whole batches only). A transaction's fixed cost (on SQLite its WAL
// write and fsync, about 1 ms) was most of a 100-event batch's: measured
// in docs/benchmarks.md.
func (i *Ingester) PublishMany(ctx context.Context, events []*herald.Event) ([]store.EventInsertResult, error) {
	if len(events) == 0 {
		return nil, nil
	}
	start := time.Now()
	var (
		res []store.EventInsertResult
		err error
	)
	if i.started.Load() {
		if i.yieldToSingles(start) {
			select {
			case i.batchTurn <- struct{}{}:
				defer func() { <-i.batchTurn }()
			case <-ctx.Done():
				i.cfg.Observer.ObservePublish(time.Since(start), ctx.Err())
				return nil, ctx.Err()
			}
		}
		r := &request{evs: events, token: tokenOf(ctx), done: make(chan struct{})}
		if err = i.enqueue(ctx, r); err == nil {
			<-r.done // see PublishOne
			res, err = r.res, r.err
		}
	} else {
		// No committer (an ingester used without Start): commit here.
		var tokens []store.TokenCheck
		if t := tokenOf(ctx); t != nil {
			tokens = []store.TokenCheck{*t}
		}
		res, err = i.commit(ctx, events, tokens)
	}
	i.cfg.Observer.ObservePublish(time.Since(start), err)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// yieldToSingles reports whether a batch publish starting at now waits
// for its turn: a single publish came within BatchYield.
func (i *Ingester) yieldToSingles(now time.Time) bool {
	last := i.lastOne.Load()
	return last != 0 && now.UnixNano()-last < int64(i.cfg.BatchYield)
}

// guardedTries is how many inserts of one commit may check the cache's
// versions and find them moved before the commit reads the versions
// itself first and inserts unchecked, which changes cannot outrun.
const guardedTries = 3

// tokenOf returns the token ctx asks the insert to confirm, or nil.
func tokenOf(ctx context.Context) *store.TokenCheck {
	if t, ok := store.TokenCheckFrom(ctx); ok {
		return &t
	}
	return nil
}

// commit stores events in one transaction. tokens are the distinct API
// tokens the insert must confirm (nil: none): when one is gone, nothing is
// stored and the answer is store.ErrTokenGone, which flush treats as any
// refusal, committing halves until only the gone token's requests fail.
func (i *Ingester) commit(ctx context.Context, events []*herald.Event, tokens []store.TokenCheck) ([]store.EventInsertResult, error) {
	// Matching runs on the cache as it is, and the insert checks in its own
	// transaction that the cache's versions are the store's
	// (store.EventInsertManyParams.Versions): one round trip per commit,
	// not a version read and then the insert (issue 26: at steady rates
	// nearly every event is its own commit). When the versions moved, the
	// cache reloads and the events are matched again; after guardedTries
	// such misses (subscriptions changing faster than commits), the
	// versions are read first and the insert is not checked.
	var (
		inserts    []store.EventInsert
		targets    [][]*compiledSub
		kept       []int
		dropped    []string
		res        []store.EventInsertResult
		reserved   int
		now, start time.Time
		err        error
		refresh    bool
		misses     int // inserts that found the versions moved
	)
	for {
		if refresh {
			if err := i.fanout.Refresh(ctx); err != nil {
				return nil, err
			}
		}
		now = i.cfg.Now().UTC().Truncate(time.Millisecond)
		var version *store.SubscriptionsVersions
		inserts, targets, version = i.fanout.inserts(events, now, i.cfg.Tier0Delay)
		if version == nil && !refresh {
			refresh = true // never loaded
			continue
		}
		if misses >= guardedTries {
			version = nil // read by the Refresh above; insert unchecked
		}
		// herald.* events nobody receives are not stored (counted instead).
		inserts, targets, kept, dropped = i.fanout.dropUnreceived(inserts, targets)
		if len(inserts) == 0 {
			if !refresh {
				// Dropped on the cache's word alone: confirm it is current.
				refresh = true
				continue
			}
			// Only system events nobody receives, which the API never
			// publishes; should a caller to confirm come with them anyway,
			// its token is read.
			for _, t := range tokens {
				if stored, err := i.cfg.Store.APITokenGet(ctx, t.Hash); err != nil || stored.ID != t.ID {
					if err == nil || errors.Is(err, herald.ErrNotFound) {
						err = store.ErrTokenGone
					}
					return nil, err
				}
			}
			i.fanout.CountDropped(dropped)
			return spreadResults(nil, kept, events), nil
		}
		reserved = i.leaseDirect(inserts, targets, now)
		start = time.Now()
		res, err = i.cfg.Store.EventInsertMany(ctx, &store.EventInsertManyParams{
			Events: inserts, Now: now, Versions: version, Tokens: tokens,
		})
		if version != nil && errors.Is(err, store.ErrSubscriptionsMoved) {
			if reserved > 0 {
				i.cfg.Dispatcher.DispatchCancel(reserved)
			}
			refresh, misses = true, misses+1
			continue
		}
		break
	}
	deliveries := 0
	for _, in := range inserts {
		deliveries += len(in.Deliveries)
	}
	i.cfg.Observer.ObserveCommit(len(inserts), deliveries, time.Since(start), err)
	if to, ok := i.cfg.Observer.(TenantObserver); ok && err == nil {
		observeTenants(to, inserts, res)
	}
	if err != nil {
		if reserved > 0 {
			i.cfg.Dispatcher.DispatchCancel(reserved)
		}
		if errors.Is(err, store.ErrTokenGone) {
			return nil, store.ErrTokenGone // the caller's 401, as it is
		}
		return nil, fmt.Errorf("error storing events: %w", err)
	}
	pending := false
	var started []*store.ClaimedDelivery
	for n, r := range res {
		if r.Duplicate {
			continue // nothing of it was inserted
		}
		for j, d := range inserts[n].Deliveries {
			if slices.Contains(r.Dropped, d.ID) {
				continue // its subscription was deleted meanwhile: not stored, not sent
			}
			if d.LeaseOwner == "" {
				pending = true
				continue
			}
			started = append(started, claimedDirect(inserts[n].Event, &d, targets[n][j], now))
		}
	}
	if reserved > 0 {
		// Duplicates' reservations were not used: give them back first so
		// the slots are free when the attempts start.
		i.cfg.Dispatcher.DispatchCancel(reserved - len(started))
		i.cfg.Dispatcher.DispatchStart(started, now)
	}
	if pending && i.cfg.OnCommit != nil {
		i.cfg.OnCommit()
	}
	i.fanout.CountDropped(dropped)
	return spreadResults(res, kept, events), nil
}

// spreadResults returns res, the results of the inserts kept (kept: their
// input indexes, nil when all were), as one result per event: a dropped
// event's has its id and no delivery.
func spreadResults(res []store.EventInsertResult, kept []int, events []*herald.Event) []store.EventInsertResult {
	if kept == nil {
		return res
	}
	out := make([]store.EventInsertResult, len(events))
	for n, ev := range events {
		out[n] = store.EventInsertResult{ID: ev.ID}
	}
	for j, n := range kept {
		out[n] = res[j]
	}
	return out
}

// leaseDirect marks as many fresh deliveries as the dispatcher has slots
// for as leased to this node, and returns how many it reserved. Only
// deliveries due now of subscriptions a claim would not hold back qualify.
func (i *Ingester) leaseDirect(inserts []store.EventInsert, targets [][]*compiledSub, now time.Time) int {
	d := i.cfg.Dispatcher
	if d == nil || i.cfg.Tier0Delay > 0 {
		return 0
	}
	want := 0
	for n := range inserts {
		for _, cs := range targets[n] {
			if cs.directAt(now) {
				want++
			}
		}
	}
	if want == 0 {
		return 0
	}
	reserved := d.DispatchReserve(want)
	left := reserved
	for n := range inserts {
		for j := range inserts[n].Deliveries {
			if left == 0 {
				return reserved
			}
			cs := targets[n][j]
			if !cs.directAt(now) {
				continue
			}
			di := &inserts[n].Deliveries[j]
			di.LeaseOwner, di.LeaseUntil = d.DispatchLease(cs.sub, now)
			left--
		}
	}
	return reserved
}

// claimedDirect is what a claim would have returned for a delivery inserted
// leased.
func claimedDirect(ev *herald.Event, d *store.DeliveryInsert, cs *compiledSub, now time.Time) *store.ClaimedDelivery {
	due := d.NextAttemptAt
	// The event as the store will answer it: data "null" when absent.
	stored := *ev
	stored.Data = store.RawJSON(ev.Data)
	var version *int64
	if ev.Version != nil {
		v := *ev.Version
		version = &v
	}
	return &store.ClaimedDelivery{
		Delivery: &herald.Delivery{
			ID:             d.ID,
			EventID:        ev.ID,
			EventTenant:    ev.Tenant,
			SubscriptionID: cs.sub.ID,
			State:          herald.DeliveryInFlight,
			NextAttemptAt:  &due,
			EventKey:       ev.Key,
			EventVersion:   version,
			CreatedAt:      now,
			UpdatedAt:      now,
		},
		Event:        &stored,
		Subscription: cs.sub,
		Secrets:      cs.activeSecrets(now),
		Attempt:      1,
		LeaseUntil:   d.LeaseUntil,
	}
}

func (i *Ingester) committer() {
	defer i.wg.Done()
	g := &group{max: i.cfg.MaxBatch}
	for {
		i.gathering.Lock()
		g.reset()
		if g.events == 0 {
			select {
			case r := <-i.reqs:
				g.add(r)
			case <-i.stop:
				// Nothing can be queued any more (see Close): commit what
				// is, in batches as usual, but without waiting for more.
				defer i.gathering.Unlock()
				for {
					g.reset()
					if g.events == 0 {
						select {
						case r := <-i.reqs:
							g.add(r)
						default:
							return
						}
					}
					i.fill(g, 0)
					i.flush(g.reqs)
				}
			}
		}
		now := time.Now()
		close := now.Sub(i.prev) < 2*i.cfg.SteadyWait
		i.prev = now
		i.fill(g, i.wait(i.last, close))
		i.last = g.events
		i.gathering.Unlock()
		i.flush(g.reqs)
	}
}

// wait is how long a group commit waits for more events after the one
// that held last events; close says it started soon after that one (see
// Config.FlushInterval, BusyWait and SteadyWait).
func (i *Ingester) wait(last int, close bool) time.Duration {
	switch {
	case i.cfg.FlushInterval > 0:
		return i.cfg.FlushInterval
	case last >= busyGroup && i.cfg.BusyWait > 0:
		return i.cfg.BusyWait
	case close && i.cfg.SteadyWait > 0:
		return i.cfg.SteadyWait
	}
	return 0
}

// group is a committer's next group commit: whole requests up to max
// events. A request that would take it past max is carried over to the
// next group (a request larger than max commits alone).
type group struct {
	max    int
	reqs   []*request
	events int
	carry  *request
}

// add adds r, or carries it over when the group has events and r would
// take it past max.
func (g *group) add(r *request) {
	if g.events > 0 && g.events+len(r.evs) > g.max {
		g.carry = r
		return
	}
	g.reqs = append(g.reqs, r)
	g.events += len(r.evs)
}

// reset empties the group after its flush and starts the next one with
// the carried request, if any.
func (g *group) reset() {
	clear(g.reqs)
	g.reqs, g.events = g.reqs[:0], 0
	if r := g.carry; r != nil {
		g.carry = nil
		g.add(r)
	}
}

func (g *group) full() bool { return g.events >= g.max || g.carry != nil }

// fill adds queued requests to g without waiting, then waits up to wait
// for more.
func (i *Ingester) fill(g *group, wait time.Duration) {
	for !g.full() {
		select {
		case r := <-i.reqs:
			g.add(r)
			continue
		default:
		}
		break
	}
	if wait <= 0 || g.full() {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for !g.full() {
		select {
		case r := <-i.reqs:
			g.add(r)
		case <-t.C:
			return
		}
	}
}

// flush commits batch and answers its requests.
//
// A store that refuses the batch (anything but unavailable or too slow)
// refused something in it, and one refused event fails the whole
// transaction: each half is then committed on its own, down to single
// events, so only the bad events' callers get the error and every other
// caller in the group commit gets its result. One bad event costs about
// 2·log2(batch) more transactions; results and duplicates are as if the
// batch had committed whole (halves commit in order).
func (i *Ingester) flush(batch []*request) {
	var (
		events []*herald.Event
		tokens []store.TokenCheck
	)
	for _, r := range batch {
		events = append(events, r.evs...)
		if r.token != nil && !slices.Contains(tokens, *r.token) {
			tokens = append(tokens, *r.token)
		}
	}
	// The batch commits independently of any caller's context: callers
	// that gave up are simply not waiting any more.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	res, err := i.commit(ctx, events, tokens)
	cancel()
	if err != nil && len(batch) > 1 && !transientStoreError(err) {
		mid := len(batch) / 2
		i.flush(batch[:mid])
		i.flush(batch[mid:])
		return
	}
	off := 0
	for _, r := range batch {
		if err != nil {
			r.err = err
		} else {
			r.res = res[off : off+len(r.evs) : off+len(r.evs)]
			off += len(r.evs)
		}
		close(r.done)
	}
}

// transientStoreError reports an error that says nothing about the events
// written: the store did not answer (in time). Committing the same events
// again in smaller parts would not help.
func transientStoreError(err error) bool {
	return errors.Is(err, herald.ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// observeTenants reports the events newly stored per tenant (duplicates
// are not counted again). It allocates only when a commit holds a tenanted
// event.
func observeTenants(to TenantObserver, inserts []store.EventInsert, res []store.EventInsertResult) {
	var counts map[string]int
	for n, in := range inserts {
		if in.Event.Tenant == "" || (n < len(res) && res[n].Duplicate) {
			continue
		}
		if counts == nil {
			counts = map[string]int{}
		}
		counts[in.Event.Tenant]++
	}
	if counts != nil {
		to.ObserveTenantEvents(counts)
	}
}
