package delivery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func gatherSetup(t *testing.T, wait time.Duration) *completer {
	t.Helper()
	e := New(Config{Workers: 8, CompleteBatch: 4, CompleteWait: wait})
	return e.completer
}

func plain(id string) pending {
	return pending{claimed: &store.ClaimedDelivery{
		Delivery:     &herald.Delivery{ID: id},
		Subscription: &herald.Subscription{Ordering: herald.OrderingNone},
	}}
}

func keyed(id string) pending {
	return pending{claimed: &store.ClaimedDelivery{
		Delivery:     &herald.Delivery{ID: id, EventKey: "k"},
		Subscription: &herald.Subscription{Ordering: herald.OrderingFIFO},
	}}
}

func TestCompleterGather(t *testing.T) {
	t.Parallel()
	t.Run("idle engine: written at once", func(t *testing.T) {
		t.Parallel()
		c := gatherSetup(t, time.Hour)
		c.e.inflightAll.Store(1) // only the outcome in hand
		got := c.gather([]pending{plain("a")}, false)
		require.Len(t, got, 1)
	})
	t.Run("busy engine: waits for outcomes up to the batch size", func(t *testing.T) {
		t.Parallel()
		c := gatherSetup(t, time.Hour)
		c.e.inflightAll.Store(8)
		for _, id := range []string{"b", "c", "d"} {
			c.ch <- plain(id)
		}
		got := c.gather([]pending{plain("a")}, false)
		require.Len(t, got, 4, "stops at CompleteBatch, not at the hour")
	})
	t.Run("busy engine: waits at most CompleteWait", func(t *testing.T) {
		t.Parallel()
		c := gatherSetup(t, time.Millisecond)
		c.e.inflightAll.Store(8)
		got := c.gather([]pending{plain("a")}, false)
		require.Len(t, got, 1)
	})
	t.Run("an ordered key is written at once", func(t *testing.T) {
		t.Parallel()
		c := gatherSetup(t, time.Hour)
		c.e.inflightAll.Store(8)
		require.Len(t, c.gather([]pending{keyed("a")}, false), 1)
		c.ch <- keyed("b")
		c.ch <- plain("c")
		got := c.gather([]pending{plain("a")}, false)
		require.Len(t, got, 2, "stops after the keyed outcome")
	})
	t.Run("a max_in_flight slot is written at once", func(t *testing.T) {
		t.Parallel()
		c := gatherSetup(t, time.Hour)
		c.e.inflightAll.Store(8)
		p := plain("a")
		p.claimed.Subscription.MaxInFlight = 1
		require.Len(t, c.gather([]pending{p}, false), 1)
	})
	t.Run("negative: never waits", func(t *testing.T) {
		t.Parallel()
		c := gatherSetup(t, -1)
		c.e.inflightAll.Store(8)
		require.Len(t, c.gather([]pending{plain("a")}, false), 1)
	})
	t.Run("steady flow: waits with nothing else running", func(t *testing.T) {
		t.Parallel()
		e := New(Config{Workers: 8, CompleteBatch: 4, CompleteWait: time.Millisecond, SteadyCompleteWait: time.Hour})
		c := e.completer
		c.e.inflightAll.Store(1) // only the outcome in hand
		for _, id := range []string{"b", "c", "d"} {
			c.ch <- plain(id)
		}
		require.Len(t, c.gather([]pending{plain("a")}, true), 4, "stops at CompleteBatch, not at the hour")
		// Not steady: written at once, as before.
		c.ch <- plain("f")
		require.Len(t, c.gather([]pending{plain("e")}, false), 1)
		<-c.ch
	})
	t.Run("steady flow: waits at most SteadyCompleteWait", func(t *testing.T) {
		t.Parallel()
		e := New(Config{Workers: 8, CompleteBatch: 4, CompleteWait: time.Millisecond, SteadyCompleteWait: 5 * time.Millisecond})
		c := e.completer
		c.e.inflightAll.Store(1)
		require.Len(t, c.gather([]pending{plain("a")}, true), 1)
	})
	t.Run("steady flow: negative never waits", func(t *testing.T) {
		t.Parallel()
		e := New(Config{Workers: 8, CompleteBatch: 4, CompleteWait: -1, SteadyCompleteWait: -1})
		c := e.completer
		c.e.inflightAll.Store(1)
		c.ch <- plain("b")
		require.Len(t, c.gather([]pending{plain("a")}, true), 1)
	})
	t.Run("shutdown: a closed channel ends the wait", func(t *testing.T) {
		t.Parallel()
		c := gatherSetup(t, time.Hour)
		c.e.inflightAll.Store(8)
		close(c.ch)
		require.Len(t, c.gather([]pending{plain("a")}, false), 1)
	})
}
