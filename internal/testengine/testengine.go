// Package testengine runs a real delivery engine, wired as herald serve
// wires it (ingest, fan-out, direct dispatch), on a SQLite store with one
// subscription delivering to a broker destination through its Publisher.
// The broker restart tests drive it: publish events, stop the broker
// mid-stream, start it again, and check every event arrived.
package testengine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/webhook"
)

// Tiers retry for about 25 s in all: long enough to ride out a broker
// restart, short enough for a test.
var Tiers = delivery.Tiers{0, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second,
	5 * time.Second, 5 * time.Second}

// Engine is a running engine with one subscription.
type Engine struct {
	Store    store.Store
	Ingester *ingest.Ingester
	Sub      *herald.Subscription
	// Secret signs the subscription's messages.
	Secret string
}

// Start runs an engine on a fresh SQLite store whose one subscription
// (every event type, 2 s timeout) delivers to dest through pub, registered
// in a destination.Router as herald serve registers it.
func Start(t *testing.T, pub destination.Publisher, dest herald.Destination) *Engine {
	t.Helper()
	s := testdb.SQLite(t)
	secret := webhook.NewSecret()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sub, err := s.SubscriptionCreate(context.Background(), &store.SubscriptionCreateParams{Subscription: &herald.Subscription{
		ID: herald.NewID(herald.PrefixSubscription), Destination: dest,
		Headers: map[string]string{}, Ordering: herald.OrderingNone,
		TimeoutMS: 2000, State: herald.SubscriptionEnabled, CreatedAt: now, UpdatedAt: now,
		Metadata: json.RawMessage(`{}`),
	}, Secret: secret, Now: now})
	require.NoError(t, err)

	router := destination.NewRouter(webhook.NewSender(webhook.Config{}))
	router.Register(dest.Type, pub)
	fanout := ingest.NewFanout(s, nil)
	engine := delivery.New(delivery.Config{
		Store:        s,
		Sender:       withDestination{router: router, dest: dest},
		Fanout:       fanout,
		Tiers:        Tiers,
		Workers:      16,
		LeaseMargin:  2 * time.Second,
		PollInterval: 50 * time.Millisecond,
	})
	ing := ingest.New(ingest.Config{Store: s, Fanout: fanout, OnCommit: engine.Notify, Dispatcher: engine})
	ing.Start()
	engine.Start()
	t.Cleanup(func() {
		ing.Close()
		engine.Stop()
		router.Close()
	})
	return &Engine{Store: s, Ingester: ing, Sub: sub, Secret: secret}
}

// withDestination sets the subscription's destination on every request.
// Until the stores persist Subscription.Destination (issue 22's store
// migration), a claimed subscription comes back as a webhook; once they do,
// this changes nothing.
type withDestination struct {
	router *destination.Router
	dest   herald.Destination
}

func (w withDestination) Send(ctx context.Context, r *webhook.Request) webhook.Result {
	req := *r
	req.Destination = w.dest
	return w.router.Send(ctx, &req)
}

// Publish publishes event number n of type typ and returns its id once
// herald acknowledged it. It may run on any goroutine.
func (e *Engine) Publish(typ string, n int) (string, error) {
	res, err := e.Ingester.PublishOne(context.Background(), &herald.Event{Type: typ, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
	if err != nil {
		return "", err
	}
	return res.ID, nil
}

// WaitFinished waits until the subscription has n deliveries, none of them
// pending or in flight, and returns them.
func (e *Engine) WaitFinished(t *testing.T, n int, within time.Duration) []*herald.Delivery {
	t.Helper()
	var out []*herald.Delivery
	require.Eventually(t, func() bool {
		res, err := e.Store.DeliveryList(context.Background(), &store.DeliveryListParams{SubscriptionID: e.Sub.ID, Limit: 1000})
		if err != nil || len(res.Deliveries) < n {
			return false
		}
		for _, d := range res.Deliveries {
			if !d.State.Finished() {
				return false
			}
		}
		out = res.Deliveries
		return true
	}, within, 50*time.Millisecond, "the deliveries did not finish")
	return out
}

// Counter counts what a consumer received by event id.
type Counter struct {
	mu   sync.Mutex
	seen map[string]int
	all  int
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter { return &Counter{seen: map[string]int{}} }

// Add counts one message whose body is an event envelope; it returns the
// event id.
func (c *Counter) Add(body []byte) (string, error) {
	var ev struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		return "", fmt.Errorf("not an event envelope: %q", body)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[ev.ID]++
	c.all++
	return ev.ID, nil
}

// Distinct is the number of distinct events received.
func (c *Counter) Distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// Total is the number of messages received.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all
}

// Duplicates is the number of messages beyond the first per event.
func (c *Counter) Duplicates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all - len(c.seen)
}

// Has reports whether event id arrived.
func (c *Counter) Has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[id] > 0
}

// Repeated lists the events received more than once, with their counts.
func (c *Counter) Repeated() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for id, n := range c.seen {
		if n > 1 {
			out[id] = n
		}
	}
	return out
}

// PublishAll publishes n events of type typ from a goroutine, pausing
// between them so that a broker restart lands mid-stream. wait returns the
// acknowledged ids, or the first error.
func (e *Engine) PublishAll(typ string, n int, pause time.Duration) (wait func() ([]string, error)) {
	type result struct {
		ids []string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		for i := range n {
			id, err := e.Publish(typ, i)
			if err != nil {
				r.err = err
				break
			}
			r.ids = append(r.ids, id)
			time.Sleep(pause) // pacing, not a wait for async work
		}
		done <- r
	}()
	return func() ([]string, error) {
		r := <-done
		return r.ids, r.err
	}
}

// CheckAllDelivered waits until every delivery of ids finished, requires
// each delivered (none dead) and received by the consumer, and logs the
// duplicates the consumer saw (brokers without dedupe get a re-sent
// message again when an attempt failed after the broker took it).
func (e *Engine) CheckAllDelivered(t *testing.T, ids []string, c *Counter, within time.Duration) {
	t.Helper()
	ds := e.WaitFinished(t, len(ids), within)
	attempts := 0
	failed := map[string]int{} // class: message of one -> count
	for _, d := range ds {
		require.Equal(t, herald.DeliveryDelivered, d.State, "delivery %s of %s: %s %s", d.ID, d.EventID, d.LastError, d.LastMessage)
		attempts += d.AttemptCount
		if d.AttemptCount > 1 {
			got, err := e.Store.DeliveryGet(context.Background(), d.ID)
			require.NoError(t, err)
			for _, a := range got.Attempts {
				if a.Error != herald.ErrorNone {
					failed[string(a.Error)+": "+a.ErrorMessage]++
				}
			}
		}
	}
	t.Logf("failed attempts during the outage, by class and message: %v", failed)
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if !c.Has(id) {
				return false
			}
		}
		return true
	}, within, 50*time.Millisecond, "a delivered event did not reach the consumer")
	require.Equal(t, len(ids), c.Distinct(), "distinct events on the consumer")
	t.Logf("%d events, %d attempts (%d retried), consumer received %d messages: %d distinct, %d duplicates %v",
		len(ids), attempts, attempts-len(ids), c.Total(), c.Distinct(), c.Duplicates(), c.Repeated())
}
