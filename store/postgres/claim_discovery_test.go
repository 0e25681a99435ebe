package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// publishKeyed stores one event per key (in order, 1 ms apart from at),
// each with one delivery to sub, due at its publish time.
func publishKeyed(ctx context.Context, t *testing.T, s store.Store, sub string, at time.Time, keys ...string) []string {
	t.Helper()
	var ins []store.EventInsert
	var ids []string
	for i, k := range keys {
		created := at.Add(time.Duration(i) * time.Millisecond)
		v := int64(i + 1)
		id := herald.NewID(herald.PrefixDelivery)
		ins = append(ins, store.EventInsert{
			Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Key: k, Version: &v,
				Data: json.RawMessage(`{}`), CreatedAt: created},
			Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: sub, NextAttemptAt: created}},
		})
		ids = append(ids, id)
	}
	for len(ins) > 0 {
		k := min(len(ins), 1000)
		_, err := s.EventInsertMany(ctx, &store.EventInsertManyParams{Events: ins[:k], Now: at})
		require.NoError(t, err)
		ins = ins[k:]
	}
	return ids
}

func claimKeys(ctx context.Context, t *testing.T, s store.Store, tier, limit int, now time.Time) map[string]int {
	t.Helper()
	c, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Tier: tier, Limit: limit, Now: now, LeaseOwner: "n1", LeaseUntil: now.Add(time.Minute),
	})
	require.NoError(t, err)
	keys := map[string]int{}
	for _, d := range c {
		keys[d.Delivery.EventKey]++
	}
	return keys
}

// TestOrderedClaimPastBlockedKeys: the ordered claim reads a bounded page of
// due rows at a time; a fifo key with hundreds of due deliveries at the
// head of the tier, held (its head in flight) and then blocked (its head
// waiting in a retry tier), must not keep the keys behind it from being
// claimed.
func TestOrderedClaimPastBlockedKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.Postgres(t)
	sub := newSub("sub_fifo")
	sub.Ordering = herald.OrderingFIFO
	_, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: "whsec_x", Now: t0})
	require.NoError(t, err)

	head := publishKeyed(ctx, t, s, sub.ID, t0, "hot")
	now := t0.Add(time.Hour)
	c, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 1, Now: now, LeaseOwner: "n1", LeaseUntil: now.Add(time.Minute)})
	require.NoError(t, err)
	require.Len(t, c, 1)
	require.Equal(t, head[0], c[0].Delivery.ID)

	hot := make([]string, 700)
	for i := range hot {
		hot[i] = "hot"
	}
	publishKeyed(ctx, t, s, sub.ID, t0.Add(time.Second), hot...)
	var others []string
	for i := range 40 {
		others = append(others, fmt.Sprintf("k%02d", i))
	}
	publishKeyed(ctx, t, s, sub.ID, t0.Add(time.Minute), others...)

	// The hot key is held: the claim goes past its 700 due rows.
	got := claimKeys(ctx, t, s, 0, 10, now)
	require.Equal(t, 10, len(got))
	require.Zero(t, got["hot"])

	// The head fails and waits in tier 1: the key is free but blocked.
	next := now.Add(time.Hour)
	_, err = s.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Now: now, Outcomes: []store.DeliveryOutcome{{
		DeliveryID: head[0], LeaseOwner: "n1", State: herald.DeliveryPending, Tier: 1, NextAttemptAt: &next,
		Attempt: herald.Attempt{N: 1, At: now, Status: 500, Error: herald.ErrorHTTPStatus, Tier: 0},
	}}})
	require.NoError(t, err)
	got = claimKeys(ctx, t, s, 0, 100, now)
	require.Zero(t, got["hot"])
	require.Equal(t, 30, len(got), "the 30 keys not claimed yet")

	// Its head is due in tier 1 and goes alone; then the followers, one at
	// a time.
	got = claimKeys(ctx, t, s, 1, 10, next)
	require.Equal(t, map[string]int{"hot": 1}, got)
}

// TestLatestClaimManyVersions: a latest key with more pending versions than
// one discovery page holds is claimed once, as its newest version, and the
// keys behind it are claimed in the same claim.
func TestLatestClaimManyVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.Postgres(t)
	sub := newSub("sub_latest")
	sub.Ordering = herald.OrderingLatest
	_, err := s.SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: "whsec_x", Now: t0})
	require.NoError(t, err)
	hot := make([]string, 700)
	for i := range hot {
		hot[i] = "hot"
	}
	hotIDs := publishKeyed(ctx, t, s, sub.ID, t0, hot...)
	publishKeyed(ctx, t, s, sub.ID, t0.Add(time.Minute), "a", "b", "c")

	now := t0.Add(time.Hour)
	c, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Tier: 0, Limit: 10, Now: now, LeaseOwner: "n1", LeaseUntil: now.Add(time.Minute)})
	require.NoError(t, err)
	keys := map[string]string{}
	for _, d := range c {
		require.Empty(t, keys[d.Delivery.EventKey], "one delivery per key")
		keys[d.Delivery.EventKey] = d.Delivery.ID
	}
	require.Len(t, keys, 4)
	require.Equal(t, hotIDs[len(hotIDs)-1], keys["hot"], "the newest version")
	d, err := s.DeliveryGet(ctx, hotIDs[0])
	require.NoError(t, err)
	require.Equal(t, herald.DeliverySuperseded, d.Delivery.State)
}
