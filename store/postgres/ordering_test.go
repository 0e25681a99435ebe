package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// TestOrderingConcurrentNodes: two stores on one schema (two nodes), three
// claiming workers each, race for the deliveries of 50 fifo keys. No key
// ever has two deliveries claimed at once, and each key's deliveries are
// claimed in publish order.
func TestOrderingConcurrentNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	nodes := []store.Store{testdb.OpenPostgres(t, schema), testdb.OpenPostgres(t, schema)}
	sub := newSub("sub_fifo")
	sub.Ordering = herald.OrderingFIFO
	_, err := nodes[0].SubscriptionCreate(ctx, &store.SubscriptionCreateParams{Subscription: sub, Secret: "whsec_x", Now: t0})
	require.NoError(t, err)

	const keys, perKey = 50, 12
	seqOf := map[string]int{}
	for seq := 1; seq <= perKey; seq++ {
		at := t0.Add(time.Duration(seq) * time.Millisecond)
		events := make([]store.EventInsert, keys)
		for k := range events {
			id := herald.NewID(herald.PrefixDelivery)
			seqOf[id] = seq
			events[k] = store.EventInsert{
				Event: &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "t", Key: fmt.Sprintf("k%02d", k),
					Data: json.RawMessage(`{}`), CreatedAt: at},
				Deliveries: []store.DeliveryInsert{{ID: id, SubscriptionID: sub.ID, NextAttemptAt: at}},
			}
		}
		_, err := nodes[0].EventInsertMany(ctx, &store.EventInsertManyParams{Events: events, Now: at})
		require.NoError(t, err)
	}

	var (
		mu       sync.Mutex
		held     = map[string]string{} // key -> delivery claimed and not completed
		order    = map[string][]int{}  // key -> seqs in claim order
		done     int
		problems []string
		wg       sync.WaitGroup
	)
	now := t0.Add(time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for n, node := range nodes {
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("node%d-w%d", n, w)
				for time.Now().Before(deadline) {
					mu.Lock()
					finished := done == keys*perKey
					mu.Unlock()
					if finished {
						return
					}
					claimed, err := node.DeliveryClaim(ctx, &store.DeliveryClaimParams{
						Tier: 0, Limit: 5, Now: now, LeaseOwner: owner, LeaseUntil: now.Add(time.Minute)})
					if err != nil {
						t.Errorf("claim: %v", err)
						return
					}
					mu.Lock()
					for _, c := range claimed {
						key := c.Delivery.EventKey
						if other, ok := held[key]; ok {
							problems = append(problems, fmt.Sprintf("key %s: %s claimed while %s in flight", key, c.Delivery.ID, other))
						}
						held[key] = c.Delivery.ID
						order[key] = append(order[key], seqOf[c.Delivery.ID])
					}
					mu.Unlock()
					if len(claimed) == 0 {
						continue
					}
					outcomes := make([]store.DeliveryOutcome, len(claimed))
					mu.Lock()
					for i, c := range claimed {
						delete(held, c.Delivery.EventKey) // freed from here on, at the latest
						outcomes[i] = store.DeliveryOutcome{DeliveryID: c.Delivery.ID, LeaseOwner: owner,
							Attempt: herald.Attempt{N: c.Attempt, At: now, Status: 200}, State: herald.DeliveryDelivered}
					}
					mu.Unlock()
					res, err := node.DeliveryCompleteMany(ctx, &store.DeliveryCompleteManyParams{Outcomes: outcomes, Now: now})
					if err != nil {
						t.Errorf("complete: %v", err)
						return
					}
					mu.Lock()
					done += res.Applied
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	require.Empty(t, problems)
	require.Equal(t, keys*perKey, done)
	want := make([]int, perKey)
	for i := range want {
		want[i] = i + 1
	}
	for k := range keys {
		require.Equal(t, want, order[fmt.Sprintf("k%02d", k)], "key k%02d in publish order", k)
	}
}
