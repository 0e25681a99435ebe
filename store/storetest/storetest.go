package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// NewStoreFunc returns a fresh, migrated, empty store for one test; the
// factory registers its own cleanup with t.
type NewStoreFunc func(t *testing.T) store.Store

// now is the suite's clock. It has a non-zero millisecond part so a backend
// that drops milliseconds fails loudly.
var now = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

// Lease owners: two "nodes".
const (
	ownerA = "node-a"
	ownerB = "node-b"
)

// Run runs the whole suite against the backend newStore opens.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	areas := []struct {
		name string
		fn   func(t *testing.T, newStore NewStoreFunc)
	}{
		{"Store", testStore},
		{"APIToken", testAPIToken},
		{"APITokenScoped", testAPITokenScoped},
		{"PortalLink", testPortalLink},
		{"Tenant", testTenant},
		{"TenantEventKey", testTenantEventKey},
		{"Subscription", testSubscription},
		{"Connection", testConnection},
		{"Source", testSource},
		{"EventType", testEventType},
		{"Event", testEvent},
		{"Chunks", testChunks},
		{"Resend", testResend},
		{"DeliveryClaim", testDeliveryClaim},
		{"DeliveryComplete", testDeliveryComplete},
		{"DeliveryOutcome", testDeliveryOutcome},
		{"Health", testHealth},
		{"AttemptHeaders", testAttemptHeaders},
		{"Delivery", testDelivery},
		{"DeadLetter", testDeadLetter},
		{"Stats", testStats},
		{"Ordering", testOrdering},
		{"Retention", testRetention},
		{"RetentionGrowth", testRetentionGrowth},
		{"Throttle", testThrottle},
		{"Direct", testDirect},
		{"Live", testLive},
		{"Claimable", testClaimable},
		{"Tiers", testTiers},
		{"Counts", testCounts},
		{"Push", testPush},
		{"PushMany", testPushMany},
		{"PushLimits", testPushLimits},
		{"Operator", testOperator},
		{"Liveness", testLiveness},
	}
	for _, area := range areas {
		t.Run(area.name, func(t *testing.T) {
			t.Parallel()
			area.fn(t, newStore)
		})
	}
}

// bundle is what every test starts from: a fresh store and a context that
// ends with the test.
type bundle struct {
	ctx   context.Context
	store store.Store
}

func setup(t *testing.T, newStore NewStoreFunc) *bundle {
	t.Helper()
	return &bundle{ctx: t.Context(), store: newStore(t)}
}

func testStore(t *testing.T, newStore NewStoreFunc) {
	t.Run("PingAndMigrateAgain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		require.NoError(t, b.store.Ping(b.ctx))
		sub := b.createSub(t)

		// The factory migrated already: a second Migrate is a no-op that
		// keeps the data.
		require.NoError(t, b.store.Migrate(b.ctx))
		got, err := b.store.SubscriptionGet(b.ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, sub.ID, got.ID)
	})
}

// newSubscription returns a subscription with every field set, not stored.
func newSubscription(mods ...func(*herald.Subscription)) *herald.Subscription {
	sub := &herald.Subscription{
		ID:            herald.NewID(herald.PrefixSubscription),
		URL:           "https://example.com/hook",
		Method:        "POST",
		EventTypes:    []string{"bundle.*", "user.created"},
		Filter:        &herald.Filter{CEL: "data.size > 10"},
		Headers:       map[string]string{"x-tenant": "a"},
		Ordering:      herald.OrderingNone,
		KeyIntervalMS: 250,
		RateLimit:     nil, // throttles claims: throttle.go tests it
		MaxInFlight:   0,
		TimeoutMS:     10_000,
		Description:   "test subscription",
		Metadata:      json.RawMessage(`{"team":"search"}`),
		State:         herald.SubscriptionEnabled,
		CreatedAt:     now,
		UpdatedAt:     now,
	}
	for _, mod := range mods {
		mod(sub)
	}
	return sub
}

func newSecret() string { return "whsec_" + herald.NewID("") }

// createSub stores a new subscription (with a fresh secret) and returns it
// as the store answered.
func (b *bundle) createSub(t *testing.T, mods ...func(*herald.Subscription)) *herald.Subscription {
	t.Helper()
	sub, err := b.store.SubscriptionCreate(b.ctx, &store.SubscriptionCreateParams{
		Subscription: newSubscription(mods...), Secret: newSecret(), Now: now,
	})
	require.NoError(t, err)
	return sub
}

// newEvent returns an event of type bundle.indexed created at now.
func newEvent(mods ...func(*herald.Event)) *herald.Event {
	ev := &herald.Event{
		ID:        herald.NewID(herald.PrefixEvent),
		Type:      "bundle.indexed",
		Data:      json.RawMessage(`{"size":42}`),
		CreatedAt: now,
	}
	for _, mod := range mods {
		mod(ev)
	}
	return ev
}

// publish stores one event with one delivery per subscription, due at due,
// and returns the event and the delivery ids (in subIDs order).
func (b *bundle) publish(t *testing.T, due time.Time, subIDs ...string) (*herald.Event, []string) {
	t.Helper()
	ev := newEvent()
	ins := store.EventInsert{Event: ev}
	var ids []string
	for _, subID := range subIDs {
		id := herald.NewID(herald.PrefixDelivery)
		ids = append(ids, id)
		ins.Deliveries = append(ins.Deliveries, store.DeliveryInsert{ID: id, SubscriptionID: subID, NextAttemptAt: due})
	}
	res, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Events: []store.EventInsert{ins}, Now: now})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.False(t, res[0].Duplicate)
	return ev, ids
}

// publishMany stores n events in ONE call, each with one delivery for subID;
// delivery i is due at due(i). It returns the delivery ids in order.
func (b *bundle) publishMany(t *testing.T, n int, subID string, due func(i int) time.Time) []string {
	t.Helper()
	events := make([]store.EventInsert, n)
	ids := make([]string, n)
	for i := range events {
		ids[i] = herald.NewID(herald.PrefixDelivery)
		events[i] = store.EventInsert{
			Event:      newEvent(),
			Deliveries: []store.DeliveryInsert{{ID: ids[i], SubscriptionID: subID, NextAttemptAt: due(i)}},
		}
	}
	_, err := b.store.EventInsertMany(b.ctx, &store.EventInsertManyParams{Events: events, Now: now})
	require.NoError(t, err)
	return ids
}

// claim runs DeliveryClaim, filling unset params with the suite's defaults:
// Now = now, LeaseOwner = ownerA, LeaseUntil = Now + 1 minute, Limit = 100.
func (b *bundle) claim(t *testing.T, params store.DeliveryClaimParams) []*store.ClaimedDelivery {
	t.Helper()
	if params.Now.IsZero() {
		params.Now = now
	}
	if params.LeaseOwner == "" {
		params.LeaseOwner = ownerA
	}
	if params.LeaseUntil.IsZero() {
		params.LeaseUntil = params.Now.Add(time.Minute)
	}
	if params.Limit == 0 {
		params.Limit = 100
	}
	claimed, err := b.store.DeliveryClaim(b.ctx, &params)
	require.NoError(t, err)
	return claimed
}

// claimOne claims in tier and requires exactly the delivery id.
func (b *bundle) claimOne(t *testing.T, tier int, owner string, at time.Time, id string) *store.ClaimedDelivery {
	t.Helper()
	claimed := b.claim(t, store.DeliveryClaimParams{Tier: tier, LeaseOwner: owner, Now: at})
	require.Len(t, claimed, 1)
	require.Equal(t, id, claimed[0].Delivery.ID)
	return claimed[0]
}

// complete runs DeliveryCompleteMany at at.
func (b *bundle) complete(t *testing.T, at time.Time, outcomes ...store.DeliveryOutcome) *store.DeliveryCompleteManyResult {
	t.Helper()
	res, err := b.store.DeliveryCompleteMany(b.ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: at})
	require.NoError(t, err)
	return res
}

// attemptFor is the attempt a worker would record for a claim.
func attemptFor(c *store.ClaimedDelivery, at time.Time, status int, class herald.ErrorClass) herald.Attempt {
	a := herald.Attempt{N: c.Attempt, At: at, DurationMS: 12, Status: status, Error: class, Tier: c.Delivery.Tier}
	if class != herald.ErrorNone {
		a.ErrorMessage = fmt.Sprintf("endpoint answered %d", status)
		a.ResponseExcerpt = `{"error":"nope"}`
	}
	return a
}

// delivered is a 200 outcome.
func delivered(c *store.ClaimedDelivery, owner string, at time.Time) store.DeliveryOutcome {
	return store.DeliveryOutcome{
		DeliveryID: c.Delivery.ID, LeaseOwner: owner, Attempt: attemptFor(c, at, 200, herald.ErrorNone),
		State: herald.DeliveryDelivered, Tier: c.Delivery.Tier,
	}
}

// retried is a 500 outcome that moves the delivery to the next tier, due at
// next.
func retried(c *store.ClaimedDelivery, owner string, at, next time.Time) store.DeliveryOutcome {
	return store.DeliveryOutcome{
		DeliveryID: c.Delivery.ID, LeaseOwner: owner, Attempt: attemptFor(c, at, 500, herald.ErrorHTTPStatus),
		State: herald.DeliveryPending, Tier: c.Delivery.Tier + 1, NextAttemptAt: &next,
	}
}

// died is a 500 outcome that makes the delivery dead.
func died(c *store.ClaimedDelivery, owner string, at time.Time) store.DeliveryOutcome {
	return store.DeliveryOutcome{
		DeliveryID: c.Delivery.ID, LeaseOwner: owner, Attempt: attemptFor(c, at, 500, herald.ErrorHTTPStatus),
		State: herald.DeliveryDead, Tier: c.Delivery.Tier,
	}
}

func (b *bundle) delivery(t *testing.T, id string) *herald.Delivery {
	t.Helper()
	res, err := b.store.DeliveryGet(b.ctx, id)
	require.NoError(t, err)
	return res.Delivery
}

func (b *bundle) attempts(t *testing.T, id string) []herald.Attempt {
	t.Helper()
	res, err := b.store.DeliveryGet(b.ctx, id)
	require.NoError(t, err)
	return res.Attempts
}

func (b *bundle) requireState(t *testing.T, state herald.DeliveryState, ids ...string) {
	t.Helper()
	for _, id := range ids {
		require.Equal(t, state, b.delivery(t, id).State, "delivery %s", id)
	}
}

// version returns the subscriptions version.
func (b *bundle) version(t *testing.T) int64 {
	t.Helper()
	return b.versions(t).Subscriptions
}

func (b *bundle) versions(t *testing.T) store.SubscriptionsVersions {
	t.Helper()
	v, err := b.store.SubscriptionsVersion(b.ctx)
	require.NoError(t, err)
	return v
}

// claimedIDs returns the delivery ids of a claim, in claim order.
func claimedIDs(claimed []*store.ClaimedDelivery) []string {
	ids := make([]string, len(claimed))
	for i, c := range claimed {
		ids[i] = c.Delivery.ID
	}
	return ids
}

// Comparisons. Times are stored with millisecond precision, and a backend
// may answer in any location: compare instants truncated to milliseconds.

func truncMS(v time.Time) time.Time { return v.UTC().Truncate(time.Millisecond) }

func requireTimeEqual(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, truncMS(want), truncMS(got), msgAndArgs...)
}

func requireTimePtrEqual(t *testing.T, want, got *time.Time, msgAndArgs ...any) {
	t.Helper()
	if want == nil {
		require.Nil(t, got, msgAndArgs...)
		return
	}
	require.NotNil(t, got, msgAndArgs...)
	requireTimeEqual(t, *want, *got, msgAndArgs...)
}

// requireJSONEqual compares JSON documents by meaning (a backend may store
// jsonb and re-encode); empty and null are the same.
func requireJSONEqual(t *testing.T, want, got json.RawMessage, msgAndArgs ...any) {
	t.Helper()
	norm := func(v json.RawMessage) string {
		if len(v) == 0 {
			return "null"
		}
		return string(v)
	}
	require.JSONEq(t, norm(want), norm(got), msgAndArgs...)
}

// requireSubscriptionEqual compares subscriptions field by field; empty and
// nil collections are the same.
func requireSubscriptionEqual(t *testing.T, want, got *herald.Subscription) {
	t.Helper()
	require.NotNil(t, got)
	norm := func(s *herald.Subscription) herald.Subscription {
		c := *s
		if len(c.EventTypes) == 0 {
			c.EventTypes = nil
		}
		if len(c.Headers) == 0 {
			c.Headers = nil
		}
		if c.Filter.IsZero() {
			c.Filter = nil
		} else {
			f := *c.Filter
			f.ESQuery = nil
			c.Filter = &f
		}
		c.Metadata = nil
		c.CreatedAt, c.UpdatedAt = truncMS(c.CreatedAt), truncMS(c.UpdatedAt)
		// Reads fill Destination (a webhook's from URL and Method); a
		// subscription written without one is a webhook.
		c.Destination = c.Dest()
		return c
	}
	require.Equal(t, norm(want), norm(got))
	requireJSONEqual(t, want.Metadata, got.Metadata, "metadata")
	if !want.Filter.IsZero() {
		requireJSONEqual(t, want.Filter.ESQuery, got.Filter.ESQuery, "filter.es_query")
	}
}

func requireEventEqual(t *testing.T, want, got *herald.Event) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, want.ID, got.ID)
	require.Equal(t, want.Type, got.Type)
	require.Equal(t, want.Key, got.Key)
	require.Equal(t, want.Version, got.Version)
	requireJSONEqual(t, want.Data, got.Data, "data")
	requireTimeEqual(t, want.CreatedAt, got.CreatedAt, "created_at")
}

func requireAttemptsEqual(t *testing.T, want, got []herald.Attempt) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		w.At, g.At = truncMS(w.At), truncMS(g.At)
		require.Equal(t, w, g, "attempt %d", i)
	}
}

func ptr[T any](v T) *T { return &v }
