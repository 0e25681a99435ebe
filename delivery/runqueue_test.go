package delivery_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/internal/testlog"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

type queueHarness struct {
	engine *delivery.Engine
	obs    *countingObserver
	logs   *testlog.Buffer
	// offset is added to the engine's clock.
	offset atomic.Int64
}

// setupQueue runs an engine alone (no ingester) with one tier of workers.
func setupQueue(t *testing.T, s store.Store, workers int) *queueHarness {
	t.Helper()
	h := &queueHarness{obs: &countingObserver{}, logs: &testlog.Buffer{}}
	h.engine = delivery.New(delivery.Config{
		Store:             s,
		Sender:            webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
		Tiers:             delivery.Tiers{0},
		Workers:           workers,
		LeaseMargin:       2 * time.Second,
		PollInterval:      time.Hour,
		RebalanceInterval: time.Hour,
		ShutdownTimeout:   time.Minute,
		Observer:          h.obs,
		Logger:            slog.New(slog.NewTextHandler(h.logs, nil)),
		Now:               func() time.Time { return time.Now().Add(time.Duration(h.offset.Load())) },
	})
	h.engine.Start()
	t.Cleanup(h.engine.Stop)
	return h
}

// waitFull waits until every worker is held in the gate and as many
// deliveries again are queued.
func (h *queueHarness) waitFull(t *testing.T, g *gate, workers int) {
	t.Helper()
	require.Eventually(t, func() bool {
		running, _, _ := g.stats()
		return running == workers && h.engine.Inflight() == int64(2*workers)
	}, 10*time.Second, 5*time.Millisecond)
}

func prepublish(t *testing.T, s store.Store, n int) {
	t.Helper()
	ing := setupIngestOnly(t, s)
	for i := 0; i < n; i++ {
		_, err := ing.PublishOne(context.Background(), &herald.Event{Type: "queue.test", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
}

// A tier whose workers are all busy holds as many claimed deliveries again
// in its run queue: one claim takes more than the free workers, a freed
// worker starts a queued delivery without a claim, and concurrent requests
// never exceed the workers.
func TestRunQueueClaimsAhead(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		const workers, n = 4, 40
		g := newGate(t, true)
		sub := createSub(t, s, g.srv.URL, 30*time.Second, []string{"queue.*"}, webhook.NewSecret())
		prepublish(t, s, n)
		h := setupQueue(t, s, workers)

		// Every worker busy, and as many again claimed and queued.
		h.waitFull(t, g, workers)
		require.EqualValues(t, 1, h.obs.claims.Load(), "one claim took the workers and the queue")

		g.release()
		finished(t, s, sub.ID, n)
		_, most, distinct := g.stats()
		require.Equal(t, n, distinct)
		require.LessOrEqual(t, most, workers, "the queue does not add concurrent requests")
		// Without the queue a busy tier claims on every freed worker (about
		// one claim per delivery); with it, at most one per half queue.
		require.LessOrEqual(t, h.obs.claims.Load(), int64(1+(n-2*workers)/(workers/2)+1))
	})
}

// Stop gives back what is queued at once, unsent, instead of sending it
// while shutting down.
func TestRunQueueStopReleasesQueued(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		const workers, n = 2, 10
		g := newGate(t, true)
		sub := createSub(t, s, g.srv.URL, 30*time.Second, []string{"queue.*"}, webhook.NewSecret())
		prepublish(t, s, n)
		h := setupQueue(t, s, workers)
		h.waitFull(t, g, workers)

		stopped := make(chan struct{})
		go func() { h.engine.Stop(); close(stopped) }()
		// The queued deliveries are given back while the running requests
		// are still held.
		require.Eventually(t, func() bool { return h.engine.Inflight() == workers }, 10*time.Second, time.Millisecond)
		g.release()
		<-stopped

		_, _, distinct := g.stats()
		require.Equal(t, workers, distinct, "nothing queued was sent during shutdown")
		res, err := s.DeliveryList(context.Background(), &store.DeliveryListParams{SubscriptionID: sub.ID, Limit: 100})
		require.NoError(t, err)
		pending := 0
		for _, d := range res.Deliveries {
			if d.State == herald.DeliveryPending {
				require.Zero(t, d.AttemptCount)
				pending++
			}
		}
		require.Equal(t, n-workers, pending, "queued and unclaimed deliveries are claimable at once")
	})
}

// A queued delivery whose lease no longer covers its request when a worker
// takes it is given back unsent and claimed again with a fresh lease.
func TestRunQueueStaleLeaseGivenBack(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		const n = 2
		g := newGate(t, true)
		sub := createSub(t, s, g.srv.URL, 30*time.Second, []string{"queue.*"}, webhook.NewSecret())
		prepublish(t, s, n)
		h := setupQueue(t, s, 1)
		h.waitFull(t, g, 1)

		// The queued delivery's lease (timeout 30 s + margin 2 s) has 27 s
		// left once the clock moves 5 s: less than its timeout plus half
		// the margin.
		h.offset.Store(int64(5 * time.Second))
		g.release()
		got := finished(t, s, sub.ID, n)
		for _, d := range got {
			require.Equal(t, herald.DeliveryDelivered, d.State)
			require.Equal(t, 1, d.AttemptCount, "given back without an attempt")
		}
		require.True(t, strings.Contains(h.logs.String(), "waited too long for a worker"), h.logs.String())
		_, _, distinct := g.stats()
		require.Equal(t, n, distinct)
	})
}

// nextDueCounter counts DeliveryNextDue calls, and runs onClaim (once)
// after a claim, as if work were committed while the claim ran.
type nextDueCounter struct {
	store.Store
	nextDue atomic.Int64
	claims  atomic.Int64
	onClaim atomic.Pointer[func()]
}

func (c *nextDueCounter) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	res, err := c.Store.DeliveryClaim(ctx, p)
	c.claims.Add(1)
	if f := c.onClaim.Swap(nil); f != nil {
		(*f)()
	}
	return res, err
}

func (c *nextDueCounter) DeliveryNextDue(ctx context.Context, p *store.DeliveryNextDueParams) (*time.Time, error) {
	c.nextDue.Add(1)
	return c.Store.DeliveryNextDue(ctx, p)
}

// A partial claim reads the tier's next due time only when nothing was
// committed to the tier meanwhile: when something was, the loop claims
// again at once and would not use it (a node that cannot direct-dispatch
// claims after nearly every commit).
func TestClaimSkipsNextDueWhenNotified(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		const n = 3
		g := newGate(t, false)
		sub := createSub(t, s, g.srv.URL, 30*time.Second, []string{"queue.*"}, webhook.NewSecret())
		prepublish(t, s, n)
		c := &nextDueCounter{Store: s}
		var h *queueHarness
		ready := make(chan struct{})
		notify := func() { <-ready; h.engine.Notify() }
		c.onClaim.Store(&notify)
		h = setupQueue(t, c, 8)
		close(ready)

		finished(t, s, sub.ID, n)
		// The first claim took all three and was notified: no next-due
		// read. The second, claiming what was notified, found nothing and
		// was not: one read.
		require.Eventually(t, func() bool { return c.claims.Load() == 2 && c.nextDue.Load() == 1 },
			10*time.Second, time.Millisecond, "claims %d, next-due reads %d", c.claims.Load(), c.nextDue.Load())
	})
}

// tierClaims counts claims per tier.
type tierClaims struct {
	store.Store
	mu sync.Mutex
	n  map[int]int
}

func (c *tierClaims) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.ClaimedDelivery, error) {
	c.mu.Lock()
	c.n[p.Tier]++
	c.mu.Unlock()
	return c.Store.DeliveryClaim(ctx, p)
}

func (c *tierClaims) counts() [3]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return [3]int{c.n[0], c.n[1], c.n[2]}
}

// NotifyTiers wakes only the loops of the tiers named: each woken loop
// claims, and a saturated node whose every commit woke every tier ran
// thousands of empty claims a second.
func TestNotifyTiersWakesOnlyThem(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		c := &tierClaims{Store: s, n: map[int]int{}}
		engine := delivery.New(delivery.Config{
			Store:             c,
			Sender:            webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
			Tiers:             delivery.Tiers{0, time.Minute, time.Hour},
			Workers:           6,
			PollInterval:      time.Hour,
			IdlePollInterval:  time.Hour,
			RebalanceInterval: time.Hour,
			ShutdownTimeout:   time.Minute,
			Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		engine.Start()
		t.Cleanup(engine.Stop)
		want := [3]int{1, 1, 1} // each loop's first claim
		wait := func(what string) {
			t.Helper()
			for deadline := time.Now().Add(10 * time.Second); c.counts() != want; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: claims per tier %v, want %v", what, c.counts(), want)
				}
			}
		}
		wait("start")
		engine.NotifyTiers(store.TierBit(0))
		want[0]++
		wait("tier 0 notified")
		engine.NotifyTiers(store.TierBit(2))
		want[2]++
		wait("tier 2 notified")
		engine.NotifyTiers(store.TierBit(1) | store.TierBit(2))
		want[1]++
		want[2]++
		wait("tiers 1 and 2 notified")
		engine.Notify()
		for i := range want {
			want[i]++
		}
		wait("every tier notified")
	})
}
