package push

// This file holds the gatherer: the store calls that every session makes
// at hello and after its acks (connect, list, delete) go to the store
// together, so a reconnect storm costs a statement per batch of user
// agents instead of one per user agent (issue 25).

import (
	"context"
	"errors"
	"sync"

	"github.com/heraldhq/herald"
)

const (
	// gatherMax is the most items one statement carries. The 128 workers
	// (maxWorkers) plus the storage checks they start rarely queue more;
	// the backends are proved past it (storetest's manyBatch).
	gatherMax = 256
	// gatherInFlight is how many statements of one kind run at once. A
	// call made while they run waits for the next, with everything that
	// queued behind it: group commit. One per kind leaves the node's pool
	// (4 PostgreSQL connections by default) to the endpoint's reads and
	// saves, and a statement's latency, not the pool, sets the pace.
	gatherInFlight = 1
)

// gather runs one kind of store call for many callers at once: run gets
// the items queued (distinct by key when key is set) and answers each in
// order.
type gather[I, R any] struct {
	run func(ctx context.Context, items []I) ([]R, error)
	// key, when set, keeps two items of one key out of one statement (the
	// later one waits for the next).
	key func(I) string

	mu      sync.Mutex
	queue   []*gatherCall[I, R]
	running int
}

type gatherCall[I, R any] struct {
	item I
	res  R
	err  error
	done chan struct{}
}

// do queues item and waits for its answer. The statement runs under its
// own storeTimeout, so do returns within about two of them.
func (g *gather[I, R]) do(item I) (R, error) {
	c := &gatherCall[I, R]{item: item, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	start := g.running < gatherInFlight
	if start {
		g.running++
	}
	g.mu.Unlock()
	if start {
		go g.loop()
	}
	<-c.done
	return c.res, c.err
}

// loop runs batches until the queue is empty.
func (g *gather[I, R]) loop() {
	for {
		g.mu.Lock()
		batch := g.take()
		if len(batch) == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.runBatch(batch)
	}
}

// take removes up to gatherMax calls from the queue, in order, skipping
// (and leaving queued) any whose key is already taken. g.mu is held.
func (g *gather[I, R]) take() []*gatherCall[I, R] {
	n := min(len(g.queue), gatherMax)
	if g.key == nil {
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		if len(g.queue) == 0 {
			g.queue = nil
		}
		return batch
	}
	batch := make([]*gatherCall[I, R], 0, n)
	keys := make(map[string]struct{}, n)
	rest := g.queue[:0]
	for _, c := range g.queue {
		if len(batch) == gatherMax {
			rest = append(rest, c)
			continue
		}
		k := g.key(c.item)
		if _, dup := keys[k]; dup {
			rest = append(rest, c)
			continue
		}
		keys[k] = struct{}{}
		batch = append(batch, c)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	if len(g.queue) == 0 {
		g.queue = nil
	}
	return batch
}

// runBatch runs one statement for batch and answers every call. A
// statement that fails for another reason than the store being away is
// run again one item at a time, so one bad item fails only itself.
func (g *gather[I, R]) runBatch(batch []*gatherCall[I, R]) {
	items := make([]I, len(batch))
	for i, c := range batch {
		items[i] = c.item
	}
	res, err := g.call(items)
	if err != nil && len(batch) > 1 && !transientStoreError(err) {
		for _, c := range batch {
			var one []R
			one, c.err = g.call([]I{c.item})
			if c.err == nil {
				c.res = one[0]
			}
			close(c.done)
		}
		return
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.res = res[i]
		}
		close(c.done)
	}
}

func (g *gather[I, R]) call(items []I) ([]R, error) {
	ctx, cancel := storeCtx()
	defer cancel()
	res, err := g.run(ctx, items)
	if err == nil && len(res) != len(items) {
		err = errGatherAnswers
	}
	return res, err
}

var errGatherAnswers = errors.New("push: the store answered a batch with the wrong number of results")

// transientStoreError reports whether err means the store did not answer
// (it would fail every item alike), as opposed to refusing this input.
func transientStoreError(err error) bool {
	return errors.Is(err, herald.ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
