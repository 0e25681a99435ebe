package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// keyReceiver is an endpoint that checks the per-key guarantees as requests
// arrive: never two requests of one key at once, never (latest) a version
// lower than one it already acknowledged. Each event's data says how many
// attempts fail before one succeeds ("fails"); a negative value always
// fails.
type keyReceiver struct {
	t   *testing.T
	srv *httptest.Server

	mu         sync.Mutex
	inFlight   map[string]int
	maxAcked   map[string]int64   // latest: highest version acknowledged per key
	lastSeen   map[string]int64   // version of the last request received per key
	acceptedSq map[string][]int64 // accepted versions (or seqs) per key, in order
	violations []string
	requests   int
}

func newKeyReceiver(t *testing.T) *keyReceiver {
	r := &keyReceiver{t: t, inFlight: map[string]int{}, maxAcked: map[string]int64{},
		lastSeen: map[string]int64{}, acceptedSq: map[string][]int64{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *keyReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var ev struct {
		Key     string `json:"key"`
		Version *int64 `json:"version"`
		Data    struct {
			Seq     int64 `json:"seq"`
			Fails   int   `json:"fails"`
			DelayMS int   `json:"delay_ms"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("bad body %q: %v", body, err)
		return
	}
	v := ev.Data.Seq
	if ev.Version != nil {
		v = *ev.Version
	}
	attempt, _ := strconv.Atoi(req.Header.Get("herald-attempt"))
	r.mu.Lock()
	r.requests++
	r.inFlight[ev.Key]++
	if n := r.inFlight[ev.Key]; n > 1 {
		r.violations = append(r.violations, fmt.Sprintf("key %s: %d requests in flight at once", ev.Key, n))
	}
	if acked, ok := r.maxAcked[ev.Key]; ok && ev.Version != nil && v < acked {
		r.violations = append(r.violations, fmt.Sprintf("key %s: version %d received after %d was acknowledged", ev.Key, v, acked))
	}
	r.lastSeen[ev.Key] = v
	r.mu.Unlock()

	if ev.Data.DelayMS > 0 {
		time.Sleep(time.Duration(ev.Data.DelayMS) * time.Millisecond)
	}
	ok := ev.Data.Fails >= 0 && attempt > ev.Data.Fails

	r.mu.Lock()
	if ok {
		r.acceptedSq[ev.Key] = append(r.acceptedSq[ev.Key], v)
		if v > r.maxAcked[ev.Key] {
			r.maxAcked[ev.Key] = v
		}
	}
	r.inFlight[ev.Key]--
	r.mu.Unlock()
	if ok {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusInternalServerError)
}

func (r *keyReceiver) requireNoViolations(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.violations)
}

// orderedHarness runs one ingester on stores[0] and one engine per store
// (several stores = several nodes on one database).
type orderedHarness struct {
	ing     *ingest.Ingester
	engines []*delivery.Engine
}

func setupOrdered(t *testing.T, stores []store.Store, tiers delivery.Tiers) *orderedHarness {
	t.Helper()
	h := &orderedHarness{}
	for i, s := range stores {
		h.engines = append(h.engines, delivery.New(delivery.Config{
			Store:             s,
			Sender:            webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
			Tiers:             tiers,
			Workers:           16,
			LeaseMargin:       2 * time.Second,
			PollInterval:      100 * time.Millisecond,
			RebalanceInterval: 100 * time.Millisecond,
			RescueInterval:    200 * time.Millisecond,
			NodeID:            fmt.Sprintf("node-%d", i),
		}))
	}
	// Direct dispatch on the first node, as herald serve wires it (ordered
	// subscriptions never use it; unordered ones may).
	h.ing = ingest.New(ingest.Config{Store: stores[0], Tier0Delay: tiers[0], Dispatcher: h.engines[0], OnCommit: func() {
		for _, e := range h.engines {
			e.Notify()
		}
	}})
	h.ing.Start()
	for _, e := range h.engines {
		e.Start()
	}
	t.Cleanup(func() {
		h.ing.Close()
		for _, e := range h.engines {
			e.Stop()
		}
	})
	return h
}

func createOrderedSub(t *testing.T, s store.Store, url string, ordering herald.Ordering, intervalMS int64) *herald.Subscription {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sub := &herald.Subscription{
		ID: herald.NewID(herald.PrefixSubscription), URL: url, Method: http.MethodPost,
		Headers: map[string]string{}, Ordering: ordering, KeyIntervalMS: intervalMS,
		TimeoutMS: 5000, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
		Metadata: json.RawMessage(`{}`),
	}
	created, err := s.SubscriptionCreate(context.Background(), &store.SubscriptionCreateParams{
		Subscription: sub, Secret: webhook.NewSecret(), Now: now})
	require.NoError(t, err)
	return created
}

type keyedEvent struct {
	key     string
	version *int64
	seq     int64
	fails   int
	delayMS int
}

func publishKeyed(t *testing.T, ing *ingest.Ingester, e keyedEvent) {
	data, _ := json.Marshal(map[string]any{"seq": e.seq, "fails": e.fails, "delay_ms": e.delayMS})
	_, err := ing.PublishOne(context.Background(), &herald.Event{Type: "doc.updated", Key: e.key, Version: e.version, Data: data})
	if err != nil {
		t.Errorf("publish: %v", err)
	}
}

// allFinished waits until the subscription has want deliveries, none
// pending or in flight, and returns them.
func allFinished(t *testing.T, s store.Store, subID string, want int, within time.Duration) []*herald.Delivery {
	t.Helper()
	var out []*herald.Delivery
	require.Eventually(t, func() bool {
		out = out[:0]
		before := ""
		for {
			res, err := s.DeliveryList(context.Background(), &store.DeliveryListParams{SubscriptionID: subID, Limit: 1000, Before: before})
			if err != nil {
				return false
			}
			for _, d := range res.Deliveries {
				if !d.State.Finished() {
					return false
				}
			}
			out = append(out, res.Deliveries...)
			if !res.More {
				break
			}
			before = res.Deliveries[len(res.Deliveries)-1].ID
		}
		return len(out) >= want
	}, within, 20*time.Millisecond)
	return out
}

// runAdversarialLatest publishes versions 1..versions of keys keys, shuffled
// and spread over publishers, to a latest subscription whose receiver fails
// at random, and checks the per-key guarantees at the receiver and in the
// store.
func runAdversarialLatest(t *testing.T, stores []store.Store, keys, versions int) {
	tiers := delivery.Tiers{0, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	h := setupOrdered(t, stores, tiers)
	recv := newKeyReceiver(t)
	sub := createOrderedSub(t, stores[0], recv.srv.URL, herald.OrderingLatest, 0)

	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var evs []keyedEvent
	for k := range keys {
		for v := 1; v <= versions; v++ {
			ver := int64(v)
			// Fails 0–2 times (fewer than the tiers: nothing dies).
			evs = append(evs, keyedEvent{key: fmt.Sprintf("doc-%03d", k), version: &ver,
				fails: rnd.IntN(3) * rnd.IntN(2), delayMS: rnd.IntN(20)})
		}
	}
	rnd.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	const publishers = 8
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < len(evs); i += publishers {
				publishKeyed(t, h.ing, evs[i])
			}
		}()
	}
	wg.Wait()

	dls := allFinished(t, stores[0], sub.ID, len(evs), 90*time.Second)
	recv.requireNoViolations(t)
	states := map[herald.DeliveryState]int{}
	deliveredMax := map[string]int64{}
	for _, d := range dls {
		states[d.State]++
		require.Contains(t, []herald.DeliveryState{herald.DeliveryDelivered, herald.DeliverySkipped, herald.DeliverySuperseded},
			d.State, "delivery %s", d.ID)
		if d.State == herald.DeliveryDelivered && *d.EventVersion > deliveredMax[d.EventKey] {
			deliveredMax[d.EventKey] = *d.EventVersion
		}
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for k := range keys {
		key := fmt.Sprintf("doc-%03d", k)
		require.Equal(t, int64(versions), recv.lastSeen[key], "key %s: the last request received is the newest version", key)
		require.Equal(t, int64(versions), recv.maxAcked[key], "key %s: the newest version was acknowledged", key)
		require.Equal(t, int64(versions), deliveredMax[key], "key %s", key)
	}
	t.Logf("%d events over %d keys: %d requests; delivered %d, skipped %d, superseded %d",
		len(evs), keys, recv.requests, states[herald.DeliveryDelivered], states[herald.DeliverySkipped], states[herald.DeliverySuperseded])
}

// TestOrderingLatestAdversarial: many publishers send versions of 100 keys
// in random order to a latest subscription while the receiver fails at
// random. At the end every key's last request received is its highest
// version; no request ever carried a version lower than one already
// acknowledged; never two requests of one key in flight.
func TestOrderingLatestAdversarial(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		runAdversarialLatest(t, []store.Store{s}, 100, 8)
	})
}

// runFIFO publishes seq 1..n per key (each key's events one after another,
// keys concurrently) to a fifo subscription whose receiver fails at
// random, plus a key whose first event always fails (it dies), and checks
// that every key's events were accepted in publish order, one at a time,
// and that the dead head did not block its successors.
func runFIFO(t *testing.T, stores []store.Store, keys, n int) {
	tiers := delivery.Tiers{0, 10 * time.Millisecond, 20 * time.Millisecond}
	h := setupOrdered(t, stores, tiers)
	recv := newKeyReceiver(t)
	sub := createOrderedSub(t, stores[0], recv.srv.URL, herald.OrderingFIFO, 0)

	var wg sync.WaitGroup
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(k), uint64(time.Now().UnixNano())))
			for seq := 1; seq <= n; seq++ {
				publishKeyed(t, h.ing, keyedEvent{key: fmt.Sprintf("k-%02d", k), seq: int64(seq),
					fails: rnd.IntN(3) * rnd.IntN(2), delayMS: rnd.IntN(2)})
			}
		}()
	}
	// The dead head: seq 1 always fails; 2 and 3 must still go, in order.
	publishKeyed(t, h.ing, keyedEvent{key: "dead", seq: 1, fails: -1})
	publishKeyed(t, h.ing, keyedEvent{key: "dead", seq: 2})
	publishKeyed(t, h.ing, keyedEvent{key: "dead", seq: 3, fails: 1})
	wg.Wait()

	dls := allFinished(t, stores[0], sub.ID, keys*n+3, 90*time.Second)
	recv.requireNoViolations(t)
	dead := 0
	for _, d := range dls {
		if d.State == herald.DeliveryDead {
			dead++
			require.Equal(t, "dead", d.EventKey)
		} else {
			require.Equal(t, herald.DeliveryDelivered, d.State)
		}
	}
	require.Equal(t, 1, dead)
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for k := range keys {
		key := fmt.Sprintf("k-%02d", k)
		want := make([]int64, n)
		for i := range want {
			want[i] = int64(i + 1)
		}
		require.Equal(t, want, recv.acceptedSq[key], "key %s accepted in publish order", key)
	}
	require.Equal(t, []int64{2, 3}, recv.acceptedSq["dead"], "the dead head unblocked its successors")
}

// TestOrderingFIFO: a key's deliveries arrive in publish order through
// failures and retries, one at a time; a dead head unblocks its successor.
func TestOrderingFIFO(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		runFIFO(t, []store.Store{s}, 20, 10)
	})
}

// TestOrderingStuckKeyDoesNotDelayOthers: a fifo key whose head fails and
// waits a long retry tier (with successors queued behind it) does not delay
// the other keys. The figure (time for 50 other keys to be delivered) is
// logged.
func TestOrderingStuckKeyDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		tiers := delivery.Tiers{0, 30 * time.Second}
		h := setupOrdered(t, []store.Store{s}, tiers)
		recv := newKeyReceiver(t)
		sub := createOrderedSub(t, s, recv.srv.URL, herald.OrderingFIFO, 0)
		const others = 50
		// deliverOthers publishes one event on each of 50 fresh keys and
		// waits until the receiver accepted them all.
		deliverOthers := func(prefix string) time.Duration {
			start := time.Now()
			for k := range others {
				publishKeyed(t, h.ing, keyedEvent{key: fmt.Sprintf("%s-%02d", prefix, k), seq: 1})
			}
			require.Eventually(t, func() bool {
				recv.mu.Lock()
				defer recv.mu.Unlock()
				n := 0
				for k := range others {
					n += len(recv.acceptedSq[fmt.Sprintf("%s-%02d", prefix, k)])
				}
				return n == others
			}, 10*time.Second, 2*time.Millisecond)
			return time.Since(start)
		}
		baseline := deliverOthers("warm")

		publishKeyed(t, h.ing, keyedEvent{key: "stuck", seq: 1, fails: -1})
		for seq := 2; seq <= 200; seq++ {
			publishKeyed(t, h.ing, keyedEvent{key: "stuck", seq: int64(seq)})
		}
		// The head failed once and now waits 30s in tier 1.
		require.Eventually(t, func() bool {
			recv.mu.Lock()
			defer recv.mu.Unlock()
			return recv.requests >= 1
		}, 10*time.Second, 5*time.Millisecond)

		took := deliverOthers("other")
		t.Logf("%d other keys published and delivered in %v with a stuck key (head in a 30s retry tier, 199 successors queued); %v without",
			others, took, baseline)
		require.Less(t, took, 5*time.Second)

		recv.mu.Lock()
		require.Empty(t, recv.acceptedSq["stuck"], "nothing of the stuck key passed its head")
		recv.mu.Unlock()
		recv.requireNoViolations(t)

		// Visibility: the head waits for maturity, its successors for the key.
		res, err := s.DeliveryList(context.Background(), &store.DeliveryListParams{SubscriptionID: sub.ID, State: herald.DeliveryPending, Limit: 1000})
		require.NoError(t, err)
		waits := map[store.WaitingFor]int{}
		for _, d := range res.Deliveries {
			why, err := s.DeliveryWaitingFor(context.Background(), &store.DeliveryWaitingForParams{ID: d.ID, Now: time.Now()})
			require.NoError(t, err)
			waits[why]++
		}
		require.Equal(t, map[store.WaitingFor]int{store.WaitingForMaturity: 1, store.WaitingForKey: 199}, waits)
	})
}

// TestOrderingTwoNodes: two engines on one PostgreSQL schema (two stores,
// two pools, two lease owners) keep the per-key guarantees.
func TestOrderingTwoNodes(t *testing.T) {
	t.Parallel()
	t.Run("latest", func(t *testing.T) {
		t.Parallel()
		schema := testdb.PostgresSchema(t)
		runAdversarialLatest(t, []store.Store{testdb.OpenPostgres(t, schema), testdb.OpenPostgres(t, schema)}, 100, 6)
	})
	t.Run("fifo", func(t *testing.T) {
		t.Parallel()
		schema := testdb.PostgresSchema(t)
		runFIFO(t, []store.Store{testdb.OpenPostgres(t, schema), testdb.OpenPostgres(t, schema)}, 20, 8)
	})
}
