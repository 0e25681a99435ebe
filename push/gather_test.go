package push

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// testGather is a gather of strings whose statement blocks on release
// while gate is set, and records every batch it ran.
type testGather struct {
	g       *gather[string, string]
	mu      sync.Mutex
	batches [][]string
	gate    chan struct{}
	entered chan struct{}
	fail    func(items []string) error
}

func newTestGather(key bool) *testGather {
	tg := &testGather{}
	tg.g = &gather[string, string]{run: func(_ context.Context, items []string) ([]string, error) {
		tg.mu.Lock()
		tg.batches = append(tg.batches, slices.Clone(items))
		gate, entered, fail := tg.gate, tg.entered, tg.fail
		tg.mu.Unlock()
		if entered != nil {
			entered <- struct{}{}
		}
		if gate != nil {
			<-gate
		}
		if fail != nil {
			if err := fail(items); err != nil {
				return nil, err
			}
		}
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = "answer " + it
		}
		return out, nil
	}}
	if key {
		tg.g.key = func(s string) string { return s[:1] }
	}
	return tg
}

func (tg *testGather) queued() int {
	tg.g.mu.Lock()
	defer tg.g.mu.Unlock()
	return len(tg.g.queue)
}

type gatherResult struct {
	item, res string
	err       error
}

// block makes the next statement wait, then runs first through it and
// returns once it is in the statement; release with close(tg.gate).
func (tg *testGather) block(first string, results chan<- gatherResult) {
	tg.mu.Lock()
	tg.gate, tg.entered = make(chan struct{}), make(chan struct{}, 1)
	tg.mu.Unlock()
	go tg.send(first, results)
	<-tg.entered
	tg.mu.Lock()
	tg.entered = nil
	tg.mu.Unlock()
}

func (tg *testGather) send(item string, results chan<- gatherResult) {
	res, err := tg.g.do(item)
	results <- gatherResult{item, res, err}
}

// Calls made while a statement runs go together in the next one, each
// answered with its own result.
func TestGatherCallsQueuedDuringAStatementShareTheNext(t *testing.T) {
	tg := newTestGather(false)
	results := make(chan gatherResult, 100)
	tg.block("first", results)
	for i := range 50 {
		go tg.send(fmt.Sprint("item", i), results)
	}
	waitFor(t, "50 calls queued", func() bool { return tg.queued() == 50 })
	close(tg.gate)
	for range 51 {
		r := <-results
		require.NoError(t, r.err)
		require.Equal(t, "answer "+r.item, r.res)
	}
	require.Len(t, tg.batches, 2, "the first call alone, then the 50 queued behind it")
	require.Len(t, tg.batches[1], 50)
	waitFor(t, "the loop ended", func() bool {
		tg.g.mu.Lock()
		defer tg.g.mu.Unlock()
		return tg.g.running == 0
	})
}

// A statement carries at most gatherMax items, and never two of one key.
func TestGatherBoundsAndKeys(t *testing.T) {
	tg := newTestGather(true)
	results := make(chan gatherResult, gatherMax*2)
	tg.block("z0", results)
	n := gatherMax + 10
	for i := range n {
		// Keys are the first letter: a–j, each many times.
		go tg.send(fmt.Sprintf("%c%d", 'a'+i%10, i), results)
	}
	waitFor(t, "calls queued", func() bool { return tg.queued() == n })
	close(tg.gate)
	for range n + 1 {
		r := <-results
		require.NoError(t, r.err)
		require.Equal(t, "answer "+r.item, r.res)
	}
	for _, b := range tg.batches {
		require.LessOrEqual(t, len(b), gatherMax)
		keys := map[byte]bool{}
		for _, it := range b {
			require.False(t, keys[it[0]], "key %c twice in one statement: %v", it[0], b)
			keys[it[0]] = true
		}
	}
	// Ten keys: ten items a statement once the first is done.
	require.Len(t, tg.batches[1], 10)
}

// A statement refused for its input is run again item by item, so only
// the bad item fails; a store that does not answer fails them all at once.
func TestGatherSplitsOnANonTransientError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		split bool
	}{
		{"refused", errors.New("bad input"), true},
		{"unavailable", herald.ErrStoreUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTestGather(false)
			results := make(chan gatherResult, 10)
			tg.block("first", results)
			tg.mu.Lock()
			tg.fail = func(items []string) error {
				if slices.Contains(items, "bad") {
					return tc.err
				}
				return nil
			}
			tg.mu.Unlock()
			for _, it := range []string{"a", "bad", "b"} {
				go tg.send(it, results)
			}
			waitFor(t, "calls queued", func() bool { return tg.queued() == 3 })
			close(tg.gate)
			got := map[string]gatherResult{}
			for range 4 {
				r := <-results
				got[r.item] = r
			}
			require.NoError(t, got["first"].err)
			require.ErrorIs(t, got["bad"].err, tc.err)
			if tc.split {
				require.NoError(t, got["a"].err)
				require.Equal(t, "answer a", got["a"].res)
				require.NoError(t, got["b"].err)
				require.Len(t, tg.batches, 5, "first, the three together, then each alone")
			} else {
				require.ErrorIs(t, got["a"].err, tc.err)
				require.ErrorIs(t, got["b"].err, tc.err)
				require.Len(t, tg.batches, 2)
			}
		})
	}
}

// Hellos that arrive while a connect statement runs share the next one
// (issue 25's reconnect storm: a statement per batch of user agents, not
// per user agent). It also needs a worker per waiting hello: with the
// pool's old wake-up count, a burst of submits signalled one sleeper
// and only 4 of the 20 hellos ever reached the store.
func TestHellosShareAConnectStatement(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const n = 20
	uaids := make([]string, n+1)
	for i := range uaids {
		uaids[i] = e.seedUser(t)
	}
	gate := make(chan struct{})
	entered := make(chan int, 1)
	var mu sync.Mutex
	var sizes []int
	e.fault.onConnect(func(items int) {
		mu.Lock()
		sizes = append(sizes, items)
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			entered <- items
			<-gate
		}
	})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release) // a failed wait must not leave the hub's Close waiting
	first := e.dial(t)
	first.send(map[string]any{"messageType": "hello", "uaid": uaids[0], "use_webpush": true})
	<-entered
	clients := make([]*client, n)
	for i := range n {
		clients[i] = e.dial(t)
		clients[i].send(map[string]any{"messageType": "hello", "uaid": uaids[i+1], "use_webpush": true})
	}
	waitFor(t, "hellos queued behind the first statement", func() bool {
		e.h.connects.mu.Lock()
		defer e.h.connects.mu.Unlock()
		return len(e.h.connects.queue) == n
	})
	release()
	for i, c := range append([]*client{first}, clients...) {
		r := c.readType("hello")
		require.EqualValues(t, 200, r["status"])
		require.Equal(t, uaids[i], r["uaid"])
	}
	mu.Lock()
	require.Equal(t, []int{1, n}, sizes)
	mu.Unlock()
	require.Equal(t, n+1, e.h.Connected())
	for _, uaid := range uaids {
		u, err := e.st.PushUserGet(context.Background(), uaid)
		require.NoError(t, err)
		require.Equal(t, testNode, u.NodeID)
	}
}

// A delivery to a session whose hello is taking the router record waits
// for the hello's answer instead of answering NotConnected: that answer
// made the sending node clear the record of a user agent about to be
// connected here (TestBenchPushCluster lost a message this way once
// connects were gathered).
func TestDeliverWaitsForHelloAnswer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	chid := newChid()
	uaid := e.seedUser(t, chid)
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	e.fault.onConnect(func(int) { <-gate })
	c := e.dial(t)
	c.send(map[string]any{"messageType": "hello", "uaid": uaid, "use_webpush": true})
	waitFor(t, "the session in the hub, its connect blocked", func() bool { return e.h.lookup(uaid) != nil })
	res := e.deliverAsync(e.msg(uaid, chid, 60, "during hello", ""))
	select {
	case r := <-res:
		t.Fatalf("Deliver answered %v before the hello was answered", r.out)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	c.readType("hello")
	n := c.readType("notification")
	c.ack(chid, n["version"].(string))
	require.Equal(t, Delivered, wait(t, res).out)
}

// Statements split at gatherMax: N queued calls go in one, N+1 in two,
// 2N in two full ones.
func TestGatherSplitsAtItsBound(t *testing.T) {
	for _, tc := range []struct {
		queued int
		sizes  []int
	}{
		{gatherMax, []int{gatherMax}},
		{gatherMax + 1, []int{gatherMax, 1}},
		{2 * gatherMax, []int{gatherMax, gatherMax}},
	} {
		tg := newTestGather(false)
		results := make(chan gatherResult, tc.queued+1)
		tg.block("first", results)
		for i := range tc.queued {
			go tg.send(fmt.Sprint("item", i), results)
		}
		waitFor(t, "calls queued", func() bool { return tg.queued() == tc.queued })
		close(tg.gate)
		for range tc.queued + 1 {
			require.NoError(t, (<-results).err)
		}
		var sizes []int
		for _, b := range tg.batches[1:] {
			sizes = append(sizes, len(b))
		}
		require.Equal(t, tc.sizes, sizes, "%d queued", tc.queued)
	}
}
