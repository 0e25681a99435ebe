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

// In a steady flow the batch naps instead of receiving each outcome (issue
// 26); these end the nap long before its hour.
func TestCompleterSteadyNap(t *testing.T) {
	t.Parallel()
	steady := func(t *testing.T, workers, batch int) *completer {
		t.Helper()
		e := New(Config{Workers: workers, CompleteBatch: batch, CompleteWait: time.Millisecond, SteadyCompleteWait: time.Hour})
		e.completer.e.inflightAll.Store(1)
		return e.completer
	}
	// napping runs gather and returns its result once it is napping.
	napping := func(t *testing.T, c *completer, first pending) <-chan []pending {
		t.Helper()
		out := make(chan []pending, 1)
		go func() { out <- c.gather([]pending{first}, true) }()
		require.Eventually(t, c.napping.Load, 10*time.Second, time.Millisecond)
		return out
	}
	result := func(t *testing.T, out <-chan []pending) []pending {
		t.Helper()
		select {
		case got := <-out:
			return got
		case <-time.After(10 * time.Second):
			t.Fatal("the nap did not end")
			return nil
		}
	}
	t.Run("queued outcomes are taken before the nap", func(t *testing.T) {
		t.Parallel()
		c := steady(t, 8, 4)
		c.add(plain("b"))
		c.add(plain("c"))
		c.add(plain("d"))
		require.Len(t, c.gather([]pending{plain("a")}, true), 4)
		require.False(t, c.napping.Load())
	})
	t.Run("an outcome that frees a waiter ends it", func(t *testing.T) {
		t.Parallel()
		c := steady(t, 8, 100)
		out := napping(t, c, plain("a"))
		c.add(plain("b"))
		c.add(keyed("c"))
		require.Len(t, result(t, out), 3)
	})
	t.Run("a full batch ends it", func(t *testing.T) {
		t.Parallel()
		c := steady(t, 8, 4)
		out := napping(t, c, plain("a"))
		for _, id := range []string{"b", "c", "d"} {
			c.add(plain(id))
		}
		require.Len(t, result(t, out), 4)
	})
	t.Run("a full queue wakes it, so add does not block", func(t *testing.T) {
		t.Parallel()
		c := steady(t, 1, 500) // the queue holds 4 outcomes
		out := napping(t, c, plain("a"))
		added := make(chan struct{})
		go func() {
			for _, id := range []string{"b", "c", "d", "e", "f", "g", "h", "i", "j"} {
				c.add(plain(id))
			}
			close(added)
		}()
		select {
		case <-added:
		case <-time.After(10 * time.Second):
			t.Fatal("add stayed blocked")
		}
		c.closeQueue()
		require.Len(t, result(t, out), 10, "the batch took every outcome")
	})
	t.Run("closing the queue ends it", func(t *testing.T) {
		t.Parallel()
		c := steady(t, 8, 100)
		out := napping(t, c, plain("a"))
		c.add(plain("b"))
		c.closeQueue()
		require.Len(t, result(t, out), 2)
	})
}
