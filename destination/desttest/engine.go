package desttest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// runEngine runs the cases that need the whole engine: tiers, dead
// letters, redrive, ordering, throttling, isolation between subscriptions.
func runEngine(t *testing.T, h Harness, pub destination.Publisher) {
	t.Run("RetryThenDeadLetter", func(t *testing.T) { testRetryDead(t, h, pub) })
	t.Run("Redrive", func(t *testing.T) { testRedrive(t, h, pub) })
	t.Run("OrderingLatest", func(t *testing.T) { testLatest(t, h, pub) })
	t.Run("RateLimit", func(t *testing.T) { testRateLimit(t, h, pub) })
	t.Run("FailingDoesNotStopOthers", func(t *testing.T) { testIsolation(t, h, pub) })
}

// Rig is a real delivery.Engine on a SQLite store, sending through a
// destination.Router with the publisher under test registered for its
// type. The restart tests of the broker packages use it too.
type Rig struct {
	Store  store.Store
	Engine *delivery.Engine
}

// NewRig starts an engine with tiers (the retry delays: tiers[0] is the
// first attempt's) on a fresh SQLite store; it stops on cleanup.
func NewRig(t *testing.T, typ herald.DestinationType, pub destination.Publisher, tiers delivery.Tiers) *Rig {
	t.Helper()
	st := testdb.SQLite(t)
	sender := webhook.NewSender(webhook.Config{})
	t.Cleanup(sender.Close)
	router := destination.NewRouter(sender)
	router.Register(typ, pub)
	engine := delivery.New(delivery.Config{
		Store:             st,
		Sender:            router,
		Tiers:             tiers,
		Workers:           8,
		LeaseMargin:       2 * time.Second,
		PollInterval:      100 * time.Millisecond,
		RebalanceInterval: 100 * time.Millisecond,
		RescueInterval:    200 * time.Millisecond,
	})
	engine.Start()
	t.Cleanup(engine.Stop)
	return &Rig{Store: st, Engine: engine}
}

// Subscribe creates a subscription to every event type delivering to d,
// edited by edit (nil: none). The destination is stored like any other
// and reaches the engine through its claims.
func (r *Rig) Subscribe(t *testing.T, d herald.Destination, edit func(*herald.Subscription)) *herald.Subscription {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	r.ensureConnection(t, d, now)
	sub := &herald.Subscription{
		ID: herald.NewID(herald.PrefixSubscription), Destination: d,
		Headers: map[string]string{}, Ordering: herald.OrderingNone, TimeoutMS: 10_000,
		State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now, Metadata: json.RawMessage(`{}`),
	}
	if edit != nil {
		edit(sub)
	}
	created, err := r.Store.SubscriptionCreate(context.Background(), &store.SubscriptionCreateParams{Subscription: sub, Secret: TestSecret, Now: now})
	require.NoError(t, err)
	return created
}

// SetDestination makes subID's next attempts go to d, as an operator's
// PATCH does: through the store.
func (r *Rig) SetDestination(t *testing.T, subID string, d herald.Destination) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	r.ensureConnection(t, d, now)
	sub, err := r.Store.SubscriptionGet(ctx, subID)
	require.NoError(t, err)
	sub.Destination = d
	sub.UpdatedAt = now
	_, err = r.Store.SubscriptionUpdate(ctx, &store.SubscriptionUpdateParams{Subscription: sub, Now: now})
	require.NoError(t, err)
}

// ensureConnection creates a broker destination's connection in the rig's
// store when absent, as the store refuses a subscription naming a
// connection it does not hold. The row only satisfies that check (its URL
// is a placeholder): the publisher under test resolves connections
// through the Connections it was built with.
func (r *Rig) ensureConnection(t *testing.T, d herald.Destination, now time.Time) {
	t.Helper()
	if d.Connection == "" {
		return
	}
	_, err := r.Store.ConnectionCreate(context.Background(), &store.ConnectionCreateParams{Connection: &herald.Connection{
		Name: d.Connection, Type: d.Type, URL: string(d.Type) + "://desttest.invalid/", AllTenants: true,
		CreatedAt: now, UpdatedAt: now}})
	if !errors.Is(err, herald.ErrConflict) {
		require.NoError(t, err)
	}
}

// Event is one event the rig publishes.
type Event struct {
	Type    string
	Key     string
	Version *int64
	Seq     int
}

// Publish stores events with one delivery per subscription in subs (one
// transaction, as ingest does) and wakes the engine; it returns the event
// ids in order.
func (r *Rig) Publish(t *testing.T, subs []*herald.Subscription, events ...Event) []string {
	t.Helper()
	now := time.Now().UTC()
	ins := make([]store.EventInsert, len(events))
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = herald.NewID(herald.PrefixEvent)
		data, err := json.Marshal(map[string]any{"seq": e.Seq})
		require.NoError(t, err)
		ev := &herald.Event{ID: ids[i], Type: e.Type, Key: e.Key, Version: e.Version, Data: data, CreatedAt: now}
		ins[i] = store.EventInsert{Event: ev}
		for _, s := range subs {
			ins[i].Deliveries = append(ins[i].Deliveries, store.DeliveryInsert{
				ID: herald.NewID(herald.PrefixDelivery), SubscriptionID: s.ID, NextAttemptAt: now})
		}
	}
	_, err := r.Store.EventInsertMany(context.Background(), &store.EventInsertManyParams{Events: ins, Now: now})
	require.NoError(t, err)
	r.Engine.Notify()
	return ids
}

// Finished waits until subID has want deliveries, all finished, and
// returns them by event id.
func (r *Rig) Finished(t *testing.T, subID string, want int, within time.Duration) map[string]*herald.Delivery {
	t.Helper()
	var out map[string]*herald.Delivery
	require.Eventually(t, func() bool {
		res, err := r.Store.DeliveryList(context.Background(), &store.DeliveryListParams{SubscriptionID: subID, Limit: 1000})
		if err != nil || len(res.Deliveries) < want {
			return false
		}
		out = map[string]*herald.Delivery{}
		for _, d := range res.Deliveries {
			if !d.State.Finished() {
				return false
			}
			out[d.EventID] = d
		}
		return true
	}, within, 20*time.Millisecond, "deliveries of %s did not all finish", subID)
	return out
}

// AllDelivered waits until subID has want deliveries, all finished,
// requires each delivered, and returns how many took more than one attempt.
func (r *Rig) AllDelivered(t *testing.T, subID string, want int, within time.Duration) (retried int) {
	t.Helper()
	for _, dl := range r.Finished(t, subID, want, within) {
		require.Equal(t, herald.DeliveryDelivered, dl.State, "delivery %s: %s %s", dl.ID, dl.LastError, dl.LastMessage)
		if dl.AttemptCount > 1 {
			retried++
		}
	}
	return retried
}

// FailedAttempts counts the failed attempts of subID's deliveries by error
// class (for test logs: what a broker outage looked like).
func (r *Rig) FailedAttempts(t *testing.T, subID string) map[herald.ErrorClass]int {
	t.Helper()
	res, err := r.Store.DeliveryList(context.Background(), &store.DeliveryListParams{SubscriptionID: subID, Limit: 1000})
	require.NoError(t, err)
	out := map[herald.ErrorClass]int{}
	for _, d := range res.Deliveries {
		if d.AttemptCount < 2 && d.State == herald.DeliveryDelivered {
			continue
		}
		got, err := r.Store.DeliveryGet(context.Background(), d.ID)
		require.NoError(t, err)
		for _, a := range got.Attempts {
			if a.Error != herald.ErrorNone {
				out[a.Error]++
			}
		}
	}
	return out
}

// failing is a destination whose attempts fail with class: the type's
// Broken one, else (broker types) one naming a connection that does not
// exist. ok is false when the type has neither.
func failing(t *testing.T, h Harness) (herald.Destination, herald.ErrorClass, bool) {
	if d, class, ok := h.Broken(t); ok {
		return d, class, true
	}
	if h.Type().UsesConnection() {
		d, _ := h.Target(t)
		d.Connection = missingConnection
		return d, herald.ErrorConnectionUnset, true
	}
	return herald.Destination{}, "", false
}

func ptr(v int64) *int64 { return &v }

func testRetryDead(t *testing.T, h Harness, pub destination.Publisher) {
	d, class, ok := failing(t, h)
	if !ok {
		t.Skipf("SKIP: destination type %s has no failing destination", h.Type())
	}
	tiers := delivery.Tiers{0, 5 * time.Millisecond, 10 * time.Millisecond}
	// A permanent failure (Result.Permanent) is dead after one attempt.
	want := len(tiers)
	if pub.Send(context.Background(), newRequest(d, uniqueType("desttest.probe"), "", map[string]any{})).Permanent {
		want = 1
	}
	rig := NewRig(t, h.Type(), pub, tiers)
	sub := rig.Subscribe(t, d, nil)
	id := rig.Publish(t, []*herald.Subscription{sub}, Event{Type: uniqueType("desttest.dead")})[0]
	dl := rig.Finished(t, sub.ID, 1, 30*time.Second)[id]
	require.Equal(t, herald.DeliveryDead, dl.State)
	got, err := rig.Store.DeliveryGet(context.Background(), dl.ID)
	require.NoError(t, err)
	require.Len(t, got.Attempts, want, "one attempt per tier (one if permanent), then dead")
	for i, a := range got.Attempts {
		require.Equal(t, class, a.Error, "attempt %d: %s", i+1, a.ErrorMessage)
		require.Equal(t, i, a.Tier)
	}
}

func testRedrive(t *testing.T, h Harness, pub destination.Publisher) {
	bad, _, ok := failing(t, h)
	if !ok {
		t.Skipf("SKIP: destination type %s has no failing destination", h.Type())
	}
	good, c := h.Target(t)
	rig := NewRig(t, h.Type(), pub, delivery.Tiers{0, 5 * time.Millisecond})
	sub := rig.Subscribe(t, bad, nil)
	id := rig.Publish(t, []*herald.Subscription{sub}, Event{Type: uniqueType("desttest.redrive"), Seq: 7})[0]
	dl := rig.Finished(t, sub.ID, 1, 30*time.Second)[id]
	require.Equal(t, herald.DeliveryDead, dl.State)

	// The operator fixes the destination and redrives the dead letters.
	rig.SetDestination(t, sub.ID, good)
	n, err := rig.Store.DeadLetterRedrive(context.Background(), &store.DeadLetterRedriveParams{SubscriptionID: sub.ID, Now: time.Now().UTC()})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	rig.Engine.Notify()
	m := next(t, c)
	if unsigned(h) == "" {
		require.Equal(t, dl.ID, m.Headers[destination.HeaderID], "the redriven delivery keeps its id")
	}
	require.Equal(t, id, decode(t, m).ID)
	require.Equal(t, 7, decode(t, m).Data.Seq)
	require.Equal(t, herald.DeliveryDelivered, rig.Finished(t, sub.ID, 1, 30*time.Second)[id].State)
	requireNone(t, c)
}

func testLatest(t *testing.T, h Harness, pub destination.Publisher) {
	d, c := h.Target(t)
	rig := NewRig(t, h.Type(), pub, delivery.Tiers{0, 5 * time.Millisecond})
	sub := rig.Subscribe(t, d, func(s *herald.Subscription) { s.Ordering = herald.OrderingLatest })
	subs := []*herald.Subscription{sub}
	typ := uniqueType("desttest.latest")

	// Versions 1..5 of k1 and 2, 1 of k2, all pending at once: only the
	// newest of each key is sent.
	var evs []Event
	for v := int64(1); v <= 5; v++ {
		evs = append(evs, Event{Type: typ, Key: "k1", Version: ptr(v)})
	}
	evs = append(evs, Event{Type: typ, Key: "k2", Version: ptr(2)}, Event{Type: typ, Key: "k2", Version: ptr(1)})
	rig.Publish(t, subs, evs...)
	got := map[string]int64{}
	for _, m := range collect(t, c, 2) {
		e := decode(t, m)
		require.NotNil(t, e.Version)
		_, dup := got[e.Key]
		require.False(t, dup, "key %s sent twice", e.Key)
		got[e.Key] = *e.Version
	}
	require.Equal(t, map[string]int64{"k1": 5, "k2": 2}, got)
	rig.Finished(t, sub.ID, len(evs), 30*time.Second)

	// An older version after v5 was delivered is skipped, a newer one sent.
	id3 := rig.Publish(t, subs, Event{Type: typ, Key: "k1", Version: ptr(3)})[0]
	require.Equal(t, herald.DeliverySkipped, rig.Finished(t, sub.ID, len(evs)+1, 30*time.Second)[id3].State)
	rig.Publish(t, subs, Event{Type: typ, Key: "k1", Version: ptr(7)})
	m := collect(t, c, 1)[0]
	require.Equal(t, int64(7), *decode(t, m).Version)
	states := map[herald.DeliveryState]int{}
	for _, dl := range rig.Finished(t, sub.ID, len(evs)+2, 30*time.Second) {
		states[dl.State]++
	}
	require.Equal(t, map[herald.DeliveryState]int{herald.DeliveryDelivered: 3, herald.DeliverySuperseded: 5,
		herald.DeliverySkipped: 1}, states)
}

// maxInWindow is the most times in any half-open window [t, t+w).
func maxInWindow(ts []time.Time, w time.Duration) int {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	best, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j].Sub(ts[i]) < w {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

func testRateLimit(t *testing.T, h Harness, pub destination.Publisher) {
	const limit, events = 3, 10
	d, c := h.Target(t)
	rig := NewRig(t, h.Type(), pub, delivery.Tiers{0, 5 * time.Millisecond})
	sub := rig.Subscribe(t, d, func(s *herald.Subscription) {
		s.RateLimit = &herald.RateLimit{Max: limit, PerSeconds: 1}
	})
	typ := uniqueType("desttest.rate")
	evs := make([]Event, events)
	for i := range evs {
		evs[i] = Event{Type: typ, Seq: i}
	}
	rig.Publish(t, []*herald.Subscription{sub}, evs...)
	msgs := collect(t, c, events)

	// Every event once (distinct messageIDs), and never more than limit
	// starts in a second: by the messages' webhook-timestamp (the attempt
	// start, whole seconds: starts in one second are within one window;
	// an Unsigned harness's messages have none) and by the starts the
	// store recorded for the attempts.
	ids := map[string]bool{}
	perSecond := map[string]int{}
	for _, m := range msgs {
		ids[messageID(t, h, m)] = true
		if unsigned(h) == "" {
			perSecond[m.Headers[destination.HeaderTimestamp]]++
		}
	}
	require.Len(t, ids, events)
	for sec, n := range perSecond {
		require.LessOrEqual(t, n, limit, "%d messages stamped in second %s", n, sec)
	}
	var starts []time.Time
	for _, dl := range rig.Finished(t, sub.ID, events, 60*time.Second) {
		require.Equal(t, herald.DeliveryDelivered, dl.State)
		got, err := rig.Store.DeliveryGet(context.Background(), dl.ID)
		require.NoError(t, err)
		for _, a := range got.Attempts {
			starts = append(starts, a.At)
		}
	}
	busiest := maxInWindow(starts, time.Second)
	t.Logf("rate limit %d/s: %d events, busiest 1 s window %d starts, per-second stamps %v", limit, events, busiest, perSecond)
	require.LessOrEqual(t, busiest, limit)
}

func testIsolation(t *testing.T, h Harness, pub destination.Publisher) {
	bad, class, ok := failing(t, h)
	if !ok {
		t.Skipf("SKIP: destination type %s has no failing destination", h.Type())
	}
	good, c := h.Target(t)
	// Many tiers: the failing subscription keeps retrying while the good
	// one delivers.
	tiers := delivery.Tiers{0, 5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}
	rig := NewRig(t, h.Type(), pub, tiers)
	subBad := rig.Subscribe(t, bad, nil)
	subGood := rig.Subscribe(t, good, nil)
	const events = 20
	typ := uniqueType("desttest.isolation")
	evs := make([]Event, events)
	for i := range evs {
		evs[i] = Event{Type: typ, Seq: i}
	}
	rig.Publish(t, []*herald.Subscription{subBad, subGood}, evs...)
	seqs := map[int]bool{}
	for _, m := range collect(t, c, events) {
		seqs[decode(t, m).Data.Seq] = true
	}
	require.Len(t, seqs, events, "every event reached the working destination once")
	for _, dl := range rig.Finished(t, subGood.ID, events, 60*time.Second) {
		require.Equal(t, herald.DeliveryDelivered, dl.State)
	}
	classes := map[herald.ErrorClass]int{}
	for _, dl := range rig.Finished(t, subBad.ID, events, 60*time.Second) {
		require.Equal(t, herald.DeliveryDead, dl.State)
		classes[dl.LastError]++
	}
	require.Equal(t, map[herald.ErrorClass]int{class: events}, classes)
}

// Distinct returns how many distinct webhook-ids msgs hold (broker
// messages: it reads the header, so not for an Unsigned harness's) and the
// duplicates (ids seen more than once, with their counts).
func Distinct(msgs []*Received) (int, map[string]int) {
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m.Headers[destination.HeaderID]]++
	}
	dups := map[string]int{}
	for id, n := range seen {
		if n > 1 {
			dups[id] = n
		}
	}
	return len(seen), dups
}

// Drain reads messages until want distinct webhook-ids arrived (broker
// messages, as Distinct) or within passes, then listens briefly for late copies; it returns every message
// read (duplicates included).
func Drain(t *testing.T, c Consumer, want int, within time.Duration) []*Received {
	t.Helper()
	deadline := time.Now().Add(within)
	var out []*Received
	seen := map[string]bool{}
	for len(seen) < want {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		m, err := c.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%d of %d distinct messages arrived within %s: %v", len(seen), want, within, err)
		}
		out = append(out, m)
		seen[m.Headers[destination.HeaderID]] = true
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitNone)
		m, err := c.Next(ctx)
		cancel()
		if err != nil {
			return out
		}
		out = append(out, m)
	}
}
