package delivery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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

type droppedTypes struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *droppedTypes) ObserveSystemEventDropped(typ string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n[typ]++
}

func (d *droppedTypes) count(typ string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[typ]
}

// A dead letter's herald.delivery.dead is not stored while nobody
// subscribes to it, only counted; once an alert subscription exists, the
// next one is stored and sent to it.
func TestDeadLetterAlertUnreceived(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}))
		t.Cleanup(failing.Close)
		fanout := ingest.NewFanout(s, nil)
		dropped := &droppedTypes{n: map[string]int{}}
		fanout.SetSystemEventObserver(dropped)
		engine := delivery.New(delivery.Config{
			Store: s, Fanout: fanout, Tiers: delivery.Tiers{0}, Workers: 2,
			Sender:       webhook.NewSender(webhook.Config{Guard: &webhook.Guard{AllowLoopback: true}}),
			PollInterval: 50 * time.Millisecond,
		})
		ing := ingest.New(ingest.Config{Store: s, Fanout: fanout, OnCommit: engine.Notify, Dispatcher: engine})
		ing.Start()
		engine.Start()
		t.Cleanup(func() {
			ing.Close()
			engine.Stop()
		})
		createSub(t, s, failing.URL, time.Second, []string{"order.*"}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		systemEvents := func() int {
			res, err := s.EventList(context.Background(), &store.EventListParams{Type: "herald.*"})
			require.NoError(t, err)
			return len(res.Events)
		}
		dead := func(id string) bool {
			res, err := s.DeliveryList(context.Background(), &store.DeliveryListParams{EventID: id, State: herald.DeliveryDead})
			require.NoError(t, err)
			return len(res.Deliveries) == 1
		}

		first, err := ing.PublishOne(context.Background(), &herald.Event{Type: "order.created", Data: []byte(`{}`)})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return dead(first.ID) }, 20*time.Second, 10*time.Millisecond)
		// Counted in the transaction that recorded the dead letter.
		require.Eventually(t, func() bool { return dropped.count(herald.EventTypeDeliveryDead) == 1 }, 5*time.Second, 10*time.Millisecond)
		require.Zero(t, systemEvents())

		createSub(t, s, failing.URL, time.Second, []string{herald.EventTypeDeliveryDead}, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		second, err := ing.PublishOne(context.Background(), &herald.Event{Type: "order.created", Data: []byte(`{}`)})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return dead(second.ID) }, 20*time.Second, 10*time.Millisecond)
		require.Equal(t, 1, systemEvents())
		require.Equal(t, 1, dropped.count(herald.EventTypeDeliveryDead))
	})
}
