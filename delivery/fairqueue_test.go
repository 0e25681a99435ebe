package delivery

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

func fqJob(sub, id string) job {
	return job{c: &store.ClaimedDelivery{
		Delivery:     &herald.Delivery{ID: id, SubscriptionID: sub},
		Subscription: &herald.Subscription{ID: sub},
	}}
}

func drainIDs(q *fairQueue) []string {
	var out []string
	for {
		j, ok := q.pop()
		if !ok {
			return out
		}
		out = append(out, j.c.Delivery.ID)
	}
}

// A subscription's few queued deliveries wait for one of each other
// subscription's, not for all of a burst's; each subscription's own order
// is kept.
func TestFairQueueRoundRobin(t *testing.T) {
	var q fairQueue
	for i := range 5 {
		q.push(fqJob("burst", "b"+string(rune('0'+i))))
	}
	q.push(fqJob("steady", "s0"))
	q.push(fqJob("steady", "s1"))
	require.Equal(t, 7, q.len())
	j, _ := q.pop()
	require.Equal(t, "b0", j.c.Delivery.ID)
	q.push(fqJob("third", "t0"))
	require.Equal(t, []string{"s0", "b1", "t0", "s1", "b2", "b3", "b4"}, drainIDs(&q))
	require.Zero(t, q.len())
	_, ok := q.pop()
	require.False(t, ok)
	// Reused after draining.
	q.push(fqJob("steady", "s2"))
	require.Equal(t, []string{"s2"}, drainIDs(&q))
}

// A subscription that never drains keeps a bounded slice.
func TestFairQueueCompacts(t *testing.T) {
	var q fairQueue
	for i := range 1000 {
		q.push(fqJob("burst", "x"))
		q.push(fqJob("burst", "x"))
		_, _ = q.pop()
		if i%10 == 0 {
			require.LessOrEqual(t, cap(q.subs["burst"].jobs), 4*q.len()+16)
		}
	}
	require.Equal(t, 1000, q.len())
	// A trickle that never drains: one or two queued at a time.
	var r fairQueue
	r.push(fqJob("trickle", "x"))
	for range 10000 {
		r.push(fqJob("trickle", "x"))
		_, _ = r.pop()
	}
	require.Equal(t, 1, r.len())
	require.LessOrEqual(t, cap(r.subs["trickle"].jobs), 16)
}

// A tier whose workers are all busy queues what it starts, and a freed
// worker takes the next subscription's delivery: a subscription claimed
// after a burst's queue filled does not wait behind all of it.
func TestRunQueueServesSubscriptionsInTurn(t *testing.T) {
	tr := &tierRunner{}
	tr.slots.Store(1)
	tr.running = 1 // the one worker is busy: start only queues
	e := &Engine{}
	var first []job
	for i := range 4 {
		first = append(first, fqJob("burst", "b"+string(rune('0'+i))))
	}
	e.start(tr, first)                        // one claim: the burst's
	e.start(tr, []job{fqJob("steady", "s0")}) // the next claim: a steady subscription's
	e.start(tr, []job{fqJob("burst", "b4"), fqJob("steady", "s1")})
	require.Equal(t, 7, tr.queued())
	var got []string
	for {
		tr.mu.Lock()
		j, ok := tr.pop()
		tr.mu.Unlock()
		if !ok {
			break
		}
		got = append(got, j.c.Delivery.ID)
	}
	require.Equal(t, []string{"b0", "s0", "b1", "s1", "b2", "b3", "b4"}, got)
}
