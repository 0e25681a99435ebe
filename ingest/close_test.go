package ingest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// memStore is the little of a store an Ingester without subscriptions
// uses, in memory, so a test can run thousands of commits quickly. It
// records every event id it stored and the size of every commit; hold,
// when set, holds the next commit until closed.
type memStore struct {
	store.Store

	mu      sync.Mutex
	stored  map[string]bool
	sizes   []int
	hold    chan struct{}
	holding chan struct{}
}

func newMemStore() *memStore { return &memStore{stored: map[string]bool{}} }

func (m *memStore) SubscriptionsVersion(context.Context) (store.SubscriptionsVersions, error) {
	return store.SubscriptionsVersions{Subscriptions: 1}, nil
}

func (m *memStore) SubscriptionListAll(context.Context) (*store.SubscriptionListAllResult, error) {
	return &store.SubscriptionListAllResult{Version: 1}, nil
}

func (m *memStore) EventInsertMany(_ context.Context, p *store.EventInsertManyParams) ([]store.EventInsertResult, error) {
	m.mu.Lock()
	hold, holding := m.hold, m.holding
	m.hold = nil
	m.mu.Unlock()
	if hold != nil {
		close(holding)
		<-hold
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sizes = append(m.sizes, len(p.Events))
	out := make([]store.EventInsertResult, len(p.Events))
	for i, in := range p.Events {
		out[i] = store.EventInsertResult{ID: in.Event.ID, Duplicate: m.stored[in.Event.ID]}
		m.stored[in.Event.ID] = true
	}
	return out, nil
}

// PublishOne racing Close: every call returns — with its result, the event
// then stored, or with ErrClosed, the event then not stored — and none
// waits forever for a commit that no committer will make.
func TestPublishRacingCloseNeverHangs(t *testing.T) {
	t.Parallel()
	const (
		rounds     = 100
		publishers = 16
	)
	for round := 0; round < rounds; round++ {
		m := newMemStore()
		ing := New(Config{Store: m, MaxBatch: 4, Committers: 2})
		ing.Start()
		type answer struct {
			id  string
			err error
		}
		answers := make(chan answer, publishers*1000)
		started := make(chan struct{}, publishers)
		var wg sync.WaitGroup
		for p := 0; p < publishers; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					if n == 1 {
						started <- struct{}{}
					}
					ev := &herald.Event{ID: herald.NewID(herald.PrefixEvent), Type: "a.b"}
					_, err := ing.PublishOne(context.Background(), ev)
					answers <- answer{ev.ID, err}
					if err != nil || n >= 999 {
						return
					}
				}
			}()
		}
		for p := 0; p < publishers; p++ {
			<-started // every publisher is publishing
		}
		ing.Close()
		waitOrFail(t, &wg, 10*time.Second, "a PublishOne racing Close never returned")
		close(answers)
		m.mu.Lock()
		for a := range answers {
			if a.err != nil {
				require.ErrorIs(t, a.err, ErrClosed)
				require.False(t, m.stored[a.id], "refused, yet stored")
				continue
			}
			require.True(t, m.stored[a.id], "answered, yet not stored")
		}
		m.mu.Unlock()
	}
}

// stallCtx is a context whose Done — which PublishOne evaluates in the
// select that queues its event, after it checked that the Ingester is
// open — stalls until Close has returned, or for at most bound. It puts a
// PublishOne exactly in the window between that check and the queueing.
type stallCtx struct {
	context.Context
	entered       chan struct{} // closed when Done is called
	closeReturned chan struct{}
	bound         time.Duration
	closeFirst    bool // Close returned while PublishOne was in the window
}

func (c *stallCtx) Done() <-chan struct{} {
	close(c.entered)
	select {
	case <-c.closeReturned:
		c.closeFirst = true
	case <-time.After(c.bound):
	}
	return nil // never done
}

// A PublishOne that checked the Ingester open and is about to queue its
// event when Close runs: Close must not finish (and the committers must not
// exit) before that event is queued, or it waits for a commit that never
// comes. The Ingester used to let Close finish; the event then went into
// the queue or got ErrClosed by a coin toss, so a few rounds find the hang.
func TestPublishInTheCloseWindowIsAnswered(t *testing.T) {
	t.Parallel()
	for round := 0; round < 10; round++ {
		m := newMemStore()
		ing := New(Config{Store: m})
		ing.Start()
		ctx := &stallCtx{
			Context: context.Background(), entered: make(chan struct{}), closeReturned: make(chan struct{}),
			// The fixed Ingester's Close waits for the PublishOne, so Done
			// always waits this long there.
			bound: 100 * time.Millisecond,
		}
		ev := event("a.b", `{}`)
		answered := make(chan error, 1)
		go func() {
			_, err := ing.PublishOne(ctx, ev)
			answered <- err
		}()
		<-ctx.entered
		go func() { ing.Close(); close(ctx.closeReturned) }()
		select {
		case err := <-answered:
			m.mu.Lock()
			stored := m.stored[ev.ID]
			m.mu.Unlock()
			if err != nil {
				require.ErrorIs(t, err, ErrClosed)
				require.False(t, stored)
			} else {
				require.True(t, stored)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: PublishOne never answered (Close returned first: %v)", round, ctx.closeFirst)
		}
		<-ctx.closeReturned
		require.False(t, ctx.closeFirst, "Close returned while a PublishOne was queueing its event")
	}
}

// What is queued when Close is called is committed in batches, as while
// running (it used to be one transaction per event).
func TestCloseDrainsInBatches(t *testing.T) {
	t.Parallel()
	const (
		rounds = 10
		n      = 40
	)
	for round := 0; round < rounds; round++ {
		m := newMemStore()
		m.hold, m.holding = make(chan struct{}), make(chan struct{})
		release := m.hold
		ing := New(Config{Store: m, MaxBatch: n})
		ing.Start()
		first := make(chan error, 1)
		go func() {
			_, err := ing.PublishOne(context.Background(), event("a.b", `{}`))
			first <- err
		}()
		<-m.holding // the first commit is in progress and held

		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = ing.PublishOne(context.Background(), event("a.b", `{}`))
			}()
		}
		require.Eventually(t, func() bool { return len(ing.reqs) == n }, 10*time.Second, time.Millisecond)
		closed := make(chan struct{})
		go func() { ing.Close(); close(closed) }()
		// Close marks the ingester closed at once (publishes are refused)
		// and then waits for the held commit.
		require.Eventually(t, func() bool {
			select {
			case <-ing.closing:
				return true
			default:
				return false
			}
		}, 10*time.Second, time.Millisecond)
		_, err := ing.PublishOne(context.Background(), event("a.b", `{}`))
		require.ErrorIs(t, err, ErrClosed)
		close(release)
		<-closed
		require.NoError(t, <-first)
		wg.Wait()
		for i := range errs {
			require.NoError(t, errs[i], "queued before Close: committed")
		}
		m.mu.Lock()
		require.Equal(t, []int{1, n}, m.sizes, "round %d: the queued %d events commit in one batch", round, n)
		m.mu.Unlock()
	}
}

// An Ingester closed without ever being started answers what was queued
// with ErrClosed instead of leaving it waiting.
func TestCloseWithoutStart(t *testing.T) {
	t.Parallel()
	ing := New(Config{Store: newMemStore()})
	done := make(chan error, 1)
	go func() {
		_, err := ing.PublishOne(context.Background(), event("a.b", `{}`))
		done <- err
	}()
	require.Eventually(t, func() bool { return len(ing.reqs) == 1 }, 10*time.Second, time.Millisecond)
	ing.Close()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("PublishOne queued before Close (never started) was not answered")
	}
}
