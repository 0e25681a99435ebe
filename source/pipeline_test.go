package source

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// pipeWait bounds every wait of these tests; pipePrefetch is their
// source's prefetch (the most a batch holds).
const (
	pipeWait     = 5 * time.Second
	pipePrefetch = 8
)

// gatePublisher holds each PublishMany until the test releases it, and
// records which events returned committed. Like the ingester, a call
// that started waits for its outcome whatever its context.
type gatePublisher struct {
	calls chan *pubCall

	mu        sync.Mutex
	committed map[string]bool
}

type pubCall struct {
	events  []*herald.Event
	release chan error
}

func newGatePublisher() *gatePublisher {
	return &gatePublisher{calls: make(chan *pubCall, 16), committed: map[string]bool{}}
}

func (p *gatePublisher) PublishMany(_ context.Context, evs []*herald.Event) ([]store.EventInsertResult, error) {
	c := &pubCall{events: evs, release: make(chan error, 1)}
	p.calls <- c
	if err := <-c.release; err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	res := make([]store.EventInsertResult, len(evs))
	for i, ev := range evs {
		p.committed[ev.ID] = true
		res[i] = store.EventInsertResult{ID: ev.ID}
	}
	return res, nil
}

func (p *gatePublisher) isCommitted(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.committed[id]
}

// next returns the next PublishMany call.
func (p *gatePublisher) next(t *testing.T) *pubCall {
	t.Helper()
	select {
	case c := <-p.calls:
		return c
	case <-time.After(pipeWait):
		t.Fatal("no PublishMany call")
		return nil
	}
}

// scriptConsumer hands out the messages the test queues, at most max a
// Receive, and checks the pipeline's rules as it is called: never more
// than window(prefetch) unsettled, each Settle the oldest unsettled
// messages in receive order, and no message acknowledged before its event
// committed.
type scriptConsumer struct {
	pub     *gatePublisher
	window  int
	arrived chan struct{} // a token when messages were queued
	settles chan []string // message ids of each Settle, acked then rejected

	mu         sync.Mutex
	queued     []*Message
	received   int   // messages returned by Receive
	unsettled  []int // sequence numbers received and not settled, in order
	violations []string
	lastSeq    int
}

func newScriptConsumer(pub *gatePublisher) *scriptConsumer {
	return &scriptConsumer{pub: pub, window: window(pipePrefetch), arrived: make(chan struct{}, 1),
		settles: make(chan []string, 16)}
}

// queue adds n messages named <name>-<i>, each with a sequence number in
// Token, and returns their ids.
func (c *scriptConsumer) queue(name string, n int) []string {
	var ids []string
	var msgs []*Message
	for i := range n {
		id := fmt.Sprintf("%s-%d", name, i)
		ids = append(ids, id)
		msgs = append(msgs, &Message{Body: []byte(`{"n":1}`), Route: "t", MessageID: id})
	}
	c.add(msgs)
	return ids
}

func (c *scriptConsumer) add(msgs []*Message) {
	c.mu.Lock()
	for _, m := range msgs {
		c.lastSeq++
		m.Token = c.lastSeq
	}
	c.queued = append(c.queued, msgs...)
	c.mu.Unlock()
	select {
	case c.arrived <- struct{}{}:
	default:
	}
}

func (c *scriptConsumer) violate(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func (c *scriptConsumer) Receive(ctx context.Context, max int) ([]*Message, error) {
	for {
		c.mu.Lock()
		if n := min(len(c.queued), max); n > 0 {
			msgs := c.queued[:n:n]
			c.queued = c.queued[n:]
			for _, m := range msgs {
				c.unsettled = append(c.unsettled, m.Token.(int))
			}
			c.received += n
			if len(c.unsettled) > c.window {
				c.violate("%d messages unsettled, more than %d", len(c.unsettled), c.window)
			}
			more := len(c.queued) > 0
			c.mu.Unlock()
			if more {
				select {
				case c.arrived <- struct{}{}:
				default:
				}
			}
			return msgs, nil
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.arrived:
		}
	}
}

func (c *scriptConsumer) Settle(_ context.Context, acked, rejected []*Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	settled := map[int]bool{}
	for _, part := range [][]*Message{acked, rejected} {
		prev := 0
		for _, m := range part {
			seq := m.Token.(int)
			if seq <= prev {
				c.violate("%s out of receive order in its Settle", m.MessageID)
			}
			prev, settled[seq] = seq, true
			ids = append(ids, m.MessageID)
		}
	}
	for _, m := range acked {
		if !c.pub.isCommitted(m.MessageID) {
			c.violate("%s acknowledged before its event committed", m.MessageID)
		}
	}
	n := len(settled)
	if n > len(c.unsettled) {
		n = len(c.unsettled)
	}
	for _, seq := range c.unsettled[:n] {
		if !settled[seq] {
			c.violate("message %d settled after a later one", seq)
		}
	}
	c.unsettled = c.unsettled[n:]
	c.settles <- ids
	return nil
}

func (c *scriptConsumer) Pending(context.Context) (int64, bool) { return 0, false }
func (c *scriptConsumer) Close() error                          { return nil }

// waitReceived waits until n messages were received.
func (c *scriptConsumer) waitReceived(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(pipeWait)
	for {
		c.mu.Lock()
		got := c.received
		c.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages received, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// nextSettle returns the ids of the next Settle.
func (c *scriptConsumer) nextSettle(t *testing.T) []string {
	t.Helper()
	select {
	case ids := <-c.settles:
		return ids
	case <-time.After(pipeWait):
		t.Fatal("no Settle")
		return nil
	}
}

func (c *scriptConsumer) checkRules(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.violations)
}

// pipeRunner starts consume on c: done receives its error, cancel ends
// its context.
func pipeRunner(t *testing.T, pub Publisher, c Consumer) (r *runner, done <-chan error, cancel context.CancelFunc) {
	t.Helper()
	src := &herald.Source{Name: "s", Type: herald.DestinationAMQP, Prefetch: pipePrefetch}
	r = &runner{m: New(Config{Publisher: pub}), src: src, conv: conv(t, src), stats: &stats{}}
	ctx, cancel := context.WithCancel(context.Background())
	ch, fin := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(fin)
		_, err := r.consume(ctx, c)
		ch <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-fin:
		case <-time.After(pipeWait):
			t.Error("consume did not return")
		}
	})
	return r, ch, cancel
}

func waitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(pipeWait):
		t.Fatal("consume did not return")
		return nil
	}
}

func eventIDs(evs []*herald.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// Batch N+1 is received and converted while batch N commits, taking what
// arrives until N's commit returned (at most prefetch); it is committed
// only after N's commit returned, and batches are settled in receive
// order, each after its own commit.
func TestPipelineOverlapsInOrder(t *testing.T) {
	t.Parallel()
	pub := newGatePublisher()
	c := newScriptConsumer(pub)
	a := c.queue("a", 3)
	r, _, _ := pipeRunner(t, pub, c)

	callA := pub.next(t)
	require.Equal(t, a, eventIDs(callA.events))
	b := c.queue("b", 2)
	c.waitReceived(t, 5) // b arrives while a commits
	b = append(b, c.queue("c", 2)...)
	c.waitReceived(t, 7) // and c joins it
	callA.release <- nil
	require.Equal(t, a, c.nextSettle(t))

	callB := pub.next(t)
	require.Equal(t, b, eventIDs(callB.events), "what arrived during a's commit, one batch")
	d := c.queue("d", 2*pipePrefetch) // more than a batch takes
	c.waitReceived(t, 7+pipePrefetch)
	callB.release <- nil
	require.Equal(t, b, c.nextSettle(t))

	callD := pub.next(t)
	require.Equal(t, d[:pipePrefetch], eventIDs(callD.events), "a batch holds at most prefetch")
	c.waitReceived(t, 7+2*pipePrefetch)
	callD.release <- nil
	require.Equal(t, d[:pipePrefetch], c.nextSettle(t))
	callE := pub.next(t)
	require.Equal(t, d[pipePrefetch:], eventIDs(callE.events))
	callE.release <- nil
	// Nothing more arrives: the settle must not wait for a next batch.
	require.Equal(t, d[pipePrefetch:], c.nextSettle(t))
	c.checkRules(t)
	// Counted once Settle returned, just after it told the test.
	var consumed int64
	deadline := time.Now().Add(pipeWait)
	for consumed < 7+2*pipePrefetch && time.Now().Before(deadline) {
		consumed += r.stats.take().consumed
		time.Sleep(time.Millisecond)
	}
	require.EqualValues(t, 7+2*pipePrefetch, consumed)
}

// A transient commit failure of batch N+1 after batch N committed: N is
// acknowledged (its events are stored), nothing of N+1 nor of the batch
// received behind it is settled, and the latter is never committed.
func TestPipelineTransientFailureSettlesOnlyCommitted(t *testing.T) {
	t.Parallel()
	pub := newGatePublisher()
	c := newScriptConsumer(pub)
	a := c.queue("a", 3)
	_, done, _ := pipeRunner(t, pub, c)

	callA := pub.next(t)
	c.queue("b", 2)
	c.waitReceived(t, 5)
	callA.release <- nil
	require.Equal(t, a, c.nextSettle(t))
	callB := pub.next(t)
	c.queue("c", 2)
	c.waitReceived(t, 7)
	callB.release <- fmt.Errorf("test outage: %w", herald.ErrStoreUnavailable)
	require.ErrorIs(t, waitErr(t, done), errStore)
	require.Empty(t, c.settles, "nothing of b or c settled")
	require.Empty(t, pub.calls, "c never committed")
	c.checkRules(t)
}

// A transient failure of the first batch settles nothing, and the batch
// received behind it is not committed ahead of it.
func TestPipelineTransientFailureOfFirst(t *testing.T) {
	t.Parallel()
	pub := newGatePublisher()
	c := newScriptConsumer(pub)
	c.queue("a", 3)
	_, done, _ := pipeRunner(t, pub, c)

	callA := pub.next(t)
	c.queue("b", 2)
	c.waitReceived(t, 5)
	callA.release <- herald.ErrStoreUnavailable
	require.ErrorIs(t, waitErr(t, done), errStore)
	require.Empty(t, c.settles)
	require.Empty(t, pub.calls)
	c.checkRules(t)
}

// At shutdown the batch whose commit is running is still settled once it
// committed.
func TestPipelineShutdownSettlesCommitted(t *testing.T) {
	t.Parallel()
	pub := newGatePublisher()
	c := newScriptConsumer(pub)
	a := c.queue("a", 3)
	_, done, cancel := pipeRunner(t, pub, c)

	callA := pub.next(t)
	cancel()
	callA.release <- nil
	require.Equal(t, a, c.nextSettle(t))
	require.ErrorIs(t, waitErr(t, done), context.Canceled)
	c.checkRules(t)
}

// A batch with no event to commit (all rejected) is settled in its turn.
func TestPipelineRejectedBatchInOrder(t *testing.T) {
	t.Parallel()
	pub := newGatePublisher()
	c := newScriptConsumer(pub)
	a := c.queue("a", 2)
	_, _, _ = pipeRunner(t, pub, c)

	callA := pub.next(t)
	c.add([]*Message{{Body: []byte(`nope`), Route: "t", MessageID: "bad-0"}})
	c.waitReceived(t, 3)
	callA.release <- nil
	require.Equal(t, a, c.nextSettle(t))
	require.Equal(t, []string{"bad-0"}, c.nextSettle(t))
	c.checkRules(t)
}
