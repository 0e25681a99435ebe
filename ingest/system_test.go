package ingest

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// droppedCounter is a SystemEventObserver counting by type.
type droppedCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *droppedCounter) ObserveSystemEventDropped(typ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[typ]++
}

func (c *droppedCounter) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// A herald.* event no subscription receives is counted, not stored; the
// results keep the input order. Once something subscribes, it is stored.
func TestSystemEventsUnreceived(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		createSub(t, s, []string{"*"}, nil, herald.SubscriptionEnabled) // a blanket subscription gets no system events
		fanout := NewFanout(s, nil)
		counted := &droppedCounter{n: map[string]int{}}
		fanout.SetSystemEventObserver(counted)
		ing := setup(t, s, Config{Fanout: fanout})
		stored := func(id string) bool {
			_, err := s.EventGet(context.Background(), &store.EventGetParams{ID: id, AnyTenant: true})
			if err != nil {
				require.ErrorIs(t, err, herald.ErrNotFound)
			}
			return err == nil
		}

		res, err := ing.PublishMany(context.Background(), []*herald.Event{
			event("order.created", `{}`),
			event(herald.EventTypeDeliveryDead, `{}`),
			event("order.paid", `{}`),
			event(herald.EventTypeQueueStale, `{}`),
		})
		require.NoError(t, err)
		require.Len(t, res, 4)
		require.Equal(t, []int{1, 0, 1, 0}, []int{res[0].DeliveryCount, res[1].DeliveryCount, res[2].DeliveryCount, res[3].DeliveryCount})
		require.True(t, stored(res[0].ID))
		require.False(t, stored(res[1].ID))
		require.True(t, stored(res[2].ID))
		require.False(t, stored(res[3].ID))
		require.NotEmpty(t, res[1].ID)
		require.Equal(t, map[string]int{herald.EventTypeDeliveryDead: 1, herald.EventTypeQueueStale: 1}, counted.get())

		// Alone in its commit.
		r, err := ing.PublishOne(context.Background(), event(herald.EventTypeSubscriptionDisabled, `{}`))
		require.NoError(t, err)
		require.False(t, stored(r.ID))
		require.Equal(t, 1, counted.get()[herald.EventTypeSubscriptionDisabled])

		// Subscribed: stored and sent.
		alerts := createSub(t, s, []string{"herald.delivery.*"}, nil, herald.SubscriptionEnabled)
		r, err = ing.PublishOne(context.Background(), event(herald.EventTypeDeliveryDead, `{}`))
		require.NoError(t, err)
		require.Equal(t, 1, r.DeliveryCount)
		got, err := s.EventGet(context.Background(), &store.EventGetParams{ID: r.ID, AnyTenant: true})
		require.NoError(t, err)
		require.Equal(t, alerts.ID, got.Deliveries[0].SubscriptionID)
		require.Equal(t, 1, counted.get()[herald.EventTypeDeliveryDead])
	})
}
