package natssrc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/source"
	"github.com/heraldhq/herald/source/sourcetest"
)

// dial opens a consumer of src on the harness's server, closed on
// cleanup.
func dial(t *testing.T, h *harness, src *herald.Source, prefetch int) *Consumer {
	t.Helper()
	if src.Name == "" {
		src.Name = "test"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, source.DialParams{Source: src, Node: "n1", Prefetch: prefetch,
		Connection: &herald.Connection{Name: "broker", Type: herald.DestinationNATS, URL: h.url}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c.(*Consumer)
}

// bodies are n messages "<prefix>-<i>".
func bodies(prefix string, n int) []sourcetest.Msg {
	msgs := make([]sourcetest.Msg, n)
	for i := range msgs {
		msgs[i] = sourcetest.Msg{Body: fmt.Appendf(nil, "%s-%d", prefix, i)}
	}
	return msgs
}

// receive calls Receive with a deadline of within.
func receive(c *Consumer, max int, within time.Duration) ([]*source.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return c.Receive(ctx, max)
}

// receiveN receives until it holds n messages (without settling).
func receiveN(t *testing.T, c *Consumer, n int) []*source.Message {
	t.Helper()
	var got []*source.Message
	for len(got) < n {
		msgs, err := receive(c, n-len(got), 2*nakDelay)
		require.NoError(t, err, "after %d of %d messages", len(got), n)
		got = append(got, msgs...)
	}
	return got
}

func texts(msgs []*source.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

func TestMessageFields(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	c := dial(t, h, src, 10)
	before := time.Now()
	h.Publish(t, src, []sourcetest.Msg{{Body: []byte(`{"a":1}`), ID: "msg-1",
		Headers: map[string]string{"X-Trace": "t1"}}})
	msgs, err := receive(c, 10, 10*time.Second)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, `{"a":1}`, string(m.Body))
	require.Equal(t, subject(src), m.Route)
	require.Equal(t, "msg-1", m.MessageID)
	require.Equal(t, "t1", m.Headers["X-Trace"])
	require.Equal(t, "msg-1", m.Headers["Nats-Msg-Id"])
	require.WithinRange(t, m.Timestamp, before.Add(-time.Second), time.Now().Add(time.Second))
	require.NoError(t, c.Settle(context.Background(), msgs, nil))
}

// TestReceiveWaitsForFirst: Receive blocks on an empty stream until a
// message comes, and returns ctx's error when ctx ends first.
func TestReceiveWaitsForFirst(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	c := dial(t, h, src, 10)
	_, err := receive(c, 10, 300*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	got := make(chan []*source.Message, 1)
	go func() {
		msgs, err := receive(c, 10, 20*time.Second)
		if err != nil {
			t.Errorf("receive: %v", err)
		}
		got <- msgs
	}()
	time.Sleep(200 * time.Millisecond) // let Receive wait; not an assertion
	h.Publish(t, src, bodies("late", 1))
	select {
	case msgs := <-got:
		require.Equal(t, []string{"late-0"}, texts(msgs))
		require.NoError(t, c.Settle(context.Background(), msgs, nil))
	case <-time.After(20 * time.Second):
		t.Fatal("Receive did not return the message")
	}
}

// TestPrefetchBound: with more messages waiting than prefetch, at most
// prefetch are unsettled at once, whatever max Receive is given.
func TestPrefetchBound(t *testing.T) {
	const prefetch, total = 5, 23
	h := newHarness(t)
	src := h.NewSource(t)
	h.Publish(t, src, bodies("p", total))
	c := dial(t, h, src, prefetch)
	n, ok := c.Pending(context.Background())
	require.True(t, ok)
	require.EqualValues(t, total, n, "backlog: not delivered plus not acknowledged")

	var all []string
	for len(all) < total {
		var held []*source.Message
		for len(held) < min(prefetch, total-len(all)) {
			msgs, err := receive(c, 100, 10*time.Second)
			require.NoError(t, err)
			held = append(held, msgs...)
			require.LessOrEqual(t, len(held), prefetch, "unsettled messages")
		}
		if len(held) == prefetch {
			// Full: nothing more comes until something is settled.
			msgs, err := receive(c, 100, 500*time.Millisecond)
			require.ErrorIs(t, err, context.DeadlineExceeded, "got %d more while %d unsettled", len(msgs), len(held))
			info, err := c.cons.Info(context.Background())
			require.NoError(t, err)
			require.LessOrEqual(t, info.NumAckPending, prefetch)
		}
		require.NoError(t, c.Settle(context.Background(), held, nil))
		all = append(all, texts(held)...)
	}
	require.Equal(t, texts(bodiesMsgs("p", total)), all, "every message once, in stream order")
	n, ok = c.Pending(context.Background())
	require.True(t, ok)
	require.Zero(t, n)
}

// TestCloseRedelivers: messages received and not settled go back to the
// stream on Close (a Nak after nakDelay), sooner than AckWait.
func TestCloseRedelivers(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	h.Publish(t, src, bodies("c", 6))
	c1 := dial(t, h, src, 10)
	first := receiveN(t, c1, 6)
	require.NoError(t, c1.Settle(context.Background(), first[:2], nil))
	require.NoError(t, c1.Close())

	start := time.Now()
	c2 := dial(t, h, src, 10)
	again := receiveN(t, c2, 4)
	require.Less(t, time.Since(start), ackWait-5*time.Second, "redelivered by the Nak, not by AckWait")
	require.ElementsMatch(t, texts(first[2:]), texts(again))
	for _, m := range again {
		md, err := m.Token.(jetstream.Msg).Metadata()
		require.NoError(t, err)
		require.EqualValues(t, 2, md.NumDelivered)
	}
	require.NoError(t, c2.Settle(context.Background(), again, nil))
	n, ok := c2.Pending(context.Background())
	require.True(t, ok)
	require.Zero(t, n)
}

// TestRejectedNotRedelivered: a rejected message is terminated: neither
// the same consumer nor a new one gets it again.
func TestRejectedNotRedelivered(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	h.Publish(t, src, bodies("r", 4))
	c1 := dial(t, h, src, 10)
	msgs := receiveN(t, c1, 4)
	require.NoError(t, c1.Settle(context.Background(), []*source.Message{msgs[0], msgs[2]},
		[]*source.Message{msgs[1], msgs[3]}))
	require.NoError(t, c1.Close())

	c2 := dial(t, h, src, 10)
	h.Publish(t, src, []sourcetest.Msg{{Body: []byte("marker")}})
	got, err := receive(c2, 10, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"marker"}, texts(got))
	require.NoError(t, c2.Settle(context.Background(), got, nil))
	_, err = receive(c2, 10, 500*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	n, ok := c2.Pending(context.Background())
	require.True(t, ok)
	require.Zero(t, n)
}

// TestSubjectFilter: a source with a subject consumes only what matches.
func TestSubjectFilter(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	src.Subject = src.Stream + ".keep.*"
	h.publishTo(t, src.Stream+".drop.x", bodies("drop", 2))
	h.publishTo(t, src.Stream+".keep.x", bodies("keep", 2))
	c := dial(t, h, src, 10)
	msgs := receiveN(t, c, 2)
	require.Equal(t, []string{"keep-0", "keep-1"}, texts(msgs))
	require.Equal(t, src.Stream+".keep.x", msgs[0].Route)
	require.NoError(t, c.Settle(context.Background(), msgs, nil))
	_, err := receive(c, 10, 300*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestDialErrors: a missing stream is named; a failed connect never
// shows the URL's password.
func TestDialErrors(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := &herald.Connection{Name: "broker", Type: herald.DestinationNATS, URL: h.url}
	src := &herald.Source{Name: "s", Type: herald.DestinationNATS, Stream: "herald_no_such_stream"}
	_, err := Dial(ctx, source.DialParams{Source: src, Connection: conn, Prefetch: 1})
	require.ErrorContains(t, err, `stream "herald_no_such_stream" does not exist`)

	bad := &herald.Connection{Name: "broker", Type: herald.DestinationNATS, URL: "nats://herald:s3cret@127.0.0.1:1"}
	_, err = Dial(ctx, source.DialParams{Source: src, Connection: bad, Prefetch: 1})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
	require.True(t, strings.HasPrefix(err.Error(), `connection "broker"`), err.Error())
	require.False(t, errors.Is(err, context.DeadlineExceeded))
}

// TestSharedDurable: nodes share the durable and its MaxAckPending: while
// one holds prefetch messages, another waits (quietly: the idle pull's
// heartbeats keep it from failing) and gets the rest once the first
// settles.
func TestSharedDurable(t *testing.T) {
	const prefetch = 5
	h := newHarness(t)
	src := h.NewSource(t)
	h.Publish(t, src, bodies("s", 2*prefetch))
	c1 := dial(t, h, src, prefetch)
	held := receiveN(t, c1, prefetch)
	c2 := dial(t, h, src, prefetch)
	_, err := receive(c2, prefetch, 5*pullHeartbeat)
	require.ErrorIs(t, err, context.DeadlineExceeded, "c2 waits while c1 holds MaxAckPending messages")
	require.NoError(t, c1.Settle(context.Background(), held, nil))
	rest := receiveN(t, c2, prefetch)
	require.NoError(t, c2.Settle(context.Background(), rest, nil))
	require.ElementsMatch(t, texts(bodiesMsgs("s", 2*prefetch)), append(texts(held), texts(rest)...))
}

func bodiesMsgs(prefix string, n int) []*source.Message {
	out := make([]*source.Message, n)
	for i, m := range bodies(prefix, n) {
		out[i] = &source.Message{Body: m.Body}
	}
	return out
}
