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

// pipeWait bounds every wait of these tests.
const pipeWait = 5 * time.Second

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

// scriptConsumer returns the batches the test queues, and checks the
// pipeline's rules as it is called: never a third batch received while
// two are unsettled, Settle in receive order, and no message acknowledged
// before its event committed.
type scriptConsumer struct {
	pub     *gatePublisher
	batches chan []*Message
	settles chan []string // message ids of each Settle, acked and rejected

	mu         sync.Mutex
	received   int // batches returned by Receive
	unsettled  []int
	lastSeq    int
	maxSettled int // the highest sequence number settled
	violations []string
}

func newScriptConsumer(pub *gatePublisher) *scriptConsumer {
	return &scriptConsumer{pub: pub, batches: make(chan []*Message, 16), settles: make(chan []string, 16)}
}

// queue adds a batch of n messages named <name>-<i>, each with a
// sequence number in Token.
func (c *scriptConsumer) queue(name string, n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	var msgs []*Message
	for i := range n {
		c.lastSeq++
		id := fmt.Sprintf("%s-%d", name, i)
		ids = append(ids, id)
		msgs = append(msgs, &Message{Body: []byte(`{"n":1}`), Route: "t", MessageID: id, Token: c.lastSeq})
	}
	c.batches <- msgs
	return ids
}

func (c *scriptConsumer) violate(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func (c *scriptConsumer) Receive(ctx context.Context, _ int) ([]*Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case msgs := <-c.batches:
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.unsettled) >= batchesInFlight {
			c.violate("batch %d received with %d batches unsettled", c.received+1, len(c.unsettled))
		}
		c.received++
		c.unsettled = append(c.unsettled, len(msgs))
		return msgs, nil
	}
}

func (c *scriptConsumer) Settle(_ context.Context, acked, rejected []*Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	highest := c.maxSettled
	for _, part := range [][]*Message{acked, rejected} {
		prev := c.maxSettled
		for _, m := range part {
			if seq := m.Token.(int); seq <= prev {
				c.violate("%s settled out of receive order", m.MessageID)
			} else {
				prev, highest = seq, max(highest, seq)
			}
			ids = append(ids, m.MessageID)
		}
	}
	for _, m := range acked {
		if !c.pub.isCommitted(m.MessageID) {
			c.violate("%s acknowledged before its event committed", m.MessageID)
		}
	}
	if len(c.unsettled) == 0 || c.unsettled[0] != len(ids) {
		c.violate("a Settle of %d messages is not the oldest batch (%v unsettled)", len(ids), c.unsettled)
	} else {
		c.unsettled = c.unsettled[1:]
	}
	c.maxSettled = highest
	c.settles <- ids
	return nil
}

func (c *scriptConsumer) Pending(context.Context) (int64, bool) { return 0, false }
func (c *scriptConsumer) Close() error                          { return nil }

func (c *scriptConsumer) receivedBatches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.received
}

// waitReceived waits until n batches were received.
func (c *scriptConsumer) waitReceived(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(pipeWait)
	for c.receivedBatches() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d batches received, want %d", c.receivedBatches(), n)
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
	src := &herald.Source{Name: "s", Type: herald.DestinationAMQP, Prefetch: 8}
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

// Batch N+1 is received and converted while batch N commits; N+1 is
// committed only after N's commit returned, and batches are settled in
// receive order, each after its own commit, never more than two in
// flight.
func TestPipelineOverlapsInOrder(t *testing.T) {
	t.Parallel()
	pub := newGatePublisher()
	c := newScriptConsumer(pub)
	a, b, d := c.queue("a", 3), c.queue("b", 2), c.queue("c", 2)
	r, _, _ := pipeRunner(t, pub, c)

	callA := pub.next(t)
	require.Equal(t, a, eventIDs(callA.events))
	c.waitReceived(t, 2) // b arrives while a commits
	callA.release <- nil
	require.Equal(t, a, c.nextSettle(t))

	callB := pub.next(t)
	require.Equal(t, b, eventIDs(callB.events))
	c.waitReceived(t, 3) // c arrives while b commits
	callB.release <- nil
	require.Equal(t, b, c.nextSettle(t))

	callC := pub.next(t)
	require.Equal(t, d, eventIDs(callC.events))
	callC.release <- nil
	// Nothing more arrives: the settle must not wait for a next batch.
	require.Equal(t, d, c.nextSettle(t))
	c.checkRules(t)
	require.EqualValues(t, 7, r.stats.take().consumed)
}

// A transient commit failure of batch N+1 after batch N committed: N is
// acknowledged (its events are stored), nothing of N+1 nor of the batch
// received behind it is settled, and the latter is never committed.
func TestPipelineTransientFailureSettlesOnlyCommitted(t *testing.T) {
	t.Parallel()
	pub := newGatePublisher()
	c := newScriptConsumer(pub)
	a := c.queue("a", 3)
	c.queue("b", 2)
	c.queue("c", 2)
	_, done, _ := pipeRunner(t, pub, c)

	pub.next(t).release <- nil
	require.Equal(t, a, c.nextSettle(t))
	callB := pub.next(t)
	c.waitReceived(t, 3)
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
	c.queue("b", 2)
	_, done, _ := pipeRunner(t, pub, c)

	callA := pub.next(t)
	c.waitReceived(t, 2)
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
	bad := []*Message{{Body: []byte(`nope`), Route: "t", MessageID: "bad-0", Token: 100}}
	c.batches <- bad
	_, _, _ = pipeRunner(t, pub, c)

	callA := pub.next(t)
	c.waitReceived(t, 2)
	callA.release <- nil
	require.Equal(t, a, c.nextSettle(t))
	require.Equal(t, []string{"bad-0"}, c.nextSettle(t))
	c.checkRules(t)
}
