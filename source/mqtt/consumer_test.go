package mqttsrc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/source"
	mqttsrc "github.com/heraldhq/herald/source/mqtt"
	"github.com/heraldhq/herald/source/sourcetest"
)

// newSource is a source on a fresh topic whose sessions end at cleanup.
func newSource(t *testing.T, h *harness) *herald.Source {
	src := h.NewSource(t)
	src.Connection = "broker"
	src.Enabled = true
	require.NoError(t, herald.CheckSource(src))
	return src
}

func dial(t *testing.T, h *harness, src *herald.Source, node string, prefetch int) source.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := mqttsrc.Dial(ctx, source.DialParams{Source: src, Connection: h.conn(), Node: node, Prefetch: prefetch})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// receive waits (up to 10 s) for the next batch.
func receive(t *testing.T, c source.Consumer, limit int) []*source.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := c.Receive(ctx, limit)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	return msgs
}

// receiveN receives until n messages came, in batches of at most limit.
func receiveN(t *testing.T, c source.Consumer, n, limit int) []*source.Message {
	t.Helper()
	var out []*source.Message
	for len(out) < n {
		out = append(out, receive(t, c, limit)...)
	}
	require.Len(t, out, n)
	return out
}

// nothingWithin asserts that no message arrives within d.
func nothingWithin(t *testing.T, c source.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	msgs, err := c.Receive(ctx, 100)
	require.ErrorIs(t, err, context.DeadlineExceeded, "got %d messages", len(msgs))
}

func numbered(prefix string, n int) []sourcetest.Msg {
	msgs := make([]sourcetest.Msg, n)
	for i := range msgs {
		msgs[i] = sourcetest.Msg{Body: []byte(fmt.Sprintf(`{"n":%d}`, i)), ID: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return msgs
}

func ids(msgs []*source.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.MessageID
	}
	return out
}

func settle(t *testing.T, c source.Consumer, acked, rejected []*source.Message) {
	t.Helper()
	require.NoError(t, c.Settle(context.Background(), acked, rejected))
}

// A message carries its payload, its user properties as headers, its
// topic as route and its correlation data as message id; no timestamp.
func TestMessageFields(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	src := newSource(t, h)
	src.Topic = strings.TrimSuffix(src.Topic, "/events") + "/+"
	c := dial(t, h, src, "a", 10)
	topic := strings.TrimSuffix(src.Topic, "/+") + "/order.created"
	p := newPublisher(t, h.url)
	p.publish(t, topic, sourcetest.Msg{Body: []byte(`{"a":1}`), Headers: map[string]string{"x-one": "1", "Trace": "é"}, ID: "id-1"})
	p.publish(t, topic, sourcetest.Msg{Body: []byte(`{"a":2}`)})
	msgs := receiveN(t, c, 2, 10)
	require.Equal(t, `{"a":1}`, string(msgs[0].Body))
	require.Equal(t, map[string]string{"x-one": "1", "Trace": "é"}, msgs[0].Headers)
	require.Equal(t, topic, msgs[0].Route)
	require.Equal(t, "id-1", msgs[0].MessageID)
	require.True(t, msgs[0].Timestamp.IsZero())
	require.Empty(t, msgs[1].MessageID, "no correlation data, no id")
	require.Empty(t, msgs[1].Headers)
	settle(t, c, msgs, nil)
	pending, ok := c.Pending(context.Background())
	require.False(t, ok)
	require.Zero(t, pending)

	require.Equal(t, "abc", mqttsrc.MessageID([]byte("abc")))
	require.Equal(t, "ff00", mqttsrc.MessageID([]byte{0xff, 0x00}), "binary correlation data as hex")
}

// With more messages waiting than the prefetch, the broker never has more
// than prefetch unacknowledged at the consumer (its Receive Maximum); each
// settled batch lets the next in, in order.
func TestPrefetchBound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	src := newSource(t, h)
	const prefetch, n = 5, 40
	c := dial(t, h, src, "a", prefetch)
	msgs := numbered("p", n)
	p := newPublisher(t, h.url)
	for _, m := range msgs {
		p.publish(t, src.Topic, m)
	}
	var got []string
	for len(got) < n {
		// Receive up to far more than the prefetch, unsettled, until the
		// broker sends no more.
		var held []*source.Message
		for len(held) < prefetch && len(got)+len(held) < n {
			held = append(held, receive(t, c, 100)...)
		}
		require.Len(t, held, min(prefetch, n-len(got)), "unsettled at once")
		nothingWithin(t, c, 300*time.Millisecond)
		settle(t, c, held, nil)
		got = append(got, ids(held)...)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("p-%d", i)
	}
	require.Equal(t, want, got, "every message once, in order")
}

// Close without Settle hands the messages back: the next consumer with
// the same client id gets them again, in order, then what came meanwhile.
func TestCloseRedelivers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	src := newSource(t, h)
	c := dial(t, h, src, "a", 10)
	p := newPublisher(t, h.url)
	for _, m := range numbered("r", 3) {
		p.publish(t, src.Topic, m)
	}
	first := receiveN(t, c, 3, 10)
	settle(t, c, first[:1], nil)
	require.NoError(t, c.Close())
	// While no consumer is connected, the session queues.
	p.publish(t, src.Topic, sourcetest.Msg{Body: []byte(`{"n":3}`), ID: "r-3"})

	c2 := dial(t, h, src, "a", 10)
	again := receiveN(t, c2, 3, 10)
	require.Equal(t, []string{"r-1", "r-2", "r-3"}, ids(again), "the unsettled ones again, then the queued one")
	settle(t, c2, again, nil)
	require.NoError(t, c2.Close())

	c3 := dial(t, h, src, "a", 10)
	nothingWithin(t, c3, 300*time.Millisecond)
}

// Rejected messages are acknowledged like acked ones (MQTT has no
// reject), in receive order, so they are never redelivered.
func TestRejectedNotRedelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	src := newSource(t, h)
	c := dial(t, h, src, "a", 10)
	p := newPublisher(t, h.url)
	for _, m := range numbered("x", 4) {
		p.publish(t, src.Topic, m)
	}
	msgs := receiveN(t, c, 4, 10)
	settle(t, c, []*source.Message{msgs[0], msgs[2]}, []*source.Message{msgs[1], msgs[3]})
	require.NoError(t, c.Close())

	c2 := dial(t, h, src, "a", 10)
	p.publish(t, src.Topic, sourcetest.Msg{Body: []byte(`{}`), ID: "marker"})
	next := receive(t, c2, 10)
	require.Equal(t, []string{"marker"}, ids(next), "nothing redelivered before the marker")
}

// A dropped connection ends Receive with an error at once (the runner
// dials again); the new session's consumer gets the unsettled messages.
// The drop here is a session takeover: another client connects with the
// consumer's client id.
func TestConnectionLossIsAnError(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	src := newSource(t, h)
	c := dial(t, h, src, "a", 10)
	p := newPublisher(t, h.url)
	p.publish(t, src.Topic, numbered("l", 1)[0])
	held := receive(t, c, 10)

	errc := make(chan error, 1)
	go func() {
		_, err := c.Receive(context.Background(), 10)
		errc <- err
	}()
	c2 := dial(t, h, src, "a", 10) // takes the session over
	select {
	case err := <-errc:
		require.Error(t, err)
		require.Contains(t, err.Error(), "MQTT broker")
	case <-time.After(10 * time.Second):
		t.Fatal("Receive did not end when the connection dropped")
	}
	require.Error(t, c.Settle(context.Background(), held, nil), "no ack on a lost connection")
	require.Equal(t, []string{"l-0"}, ids(receive(t, c2, 10)), "redelivered to the session's new connection")
}

// Two consumers of a source (two nodes) share its messages: each message
// goes to one of them.
func TestNodesCompete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	src := newSource(t, h)
	a := dial(t, h, src, "a", 100)
	b := dial(t, h, src, "b", 100)
	p := newPublisher(t, h.url)
	const n = 50
	for _, m := range numbered("c", n) {
		p.publish(t, src.Topic, m)
	}
	seen := map[string]int{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		for _, c := range []source.Consumer{a, b} {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			msgs, err := c.Receive(ctx, 100)
			cancel()
			if err == nil {
				settle(t, c, msgs, nil)
				for _, m := range msgs {
					seen[m.MessageID]++
				}
			}
		}
	}
	require.Len(t, seen, n)
	for id, k := range seen {
		require.Equal(t, 1, k, "message %s delivered once", id)
	}
}

// An ordered source's session does not depend on the node: the node
// that takes the lease over gets what the previous holder left
// unsettled.
func TestOrderedSessionFollowsTheLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	src := newSource(t, h)
	src.Ordered = true
	require.Equal(t, mqttsrc.ClientID("a", src), mqttsrc.ClientID("b", src))
	a := dial(t, h, src, "a", 10)
	p := newPublisher(t, h.url)
	for _, m := range numbered("o", 3) {
		p.publish(t, src.Topic, m)
	}
	receiveN(t, a, 3, 10)
	require.NoError(t, a.Close())
	b := dial(t, h, src, "b", 10)
	require.Equal(t, []string{"o-0", "o-1", "o-2"}, ids(receiveN(t, b, 3, 10)))

	// A competing source's sessions are per node, and per topic.
	other := *src
	other.Ordered = false
	require.NotEqual(t, mqttsrc.ClientID("a", &other), mqttsrc.ClientID("b", &other))
	moved := other
	moved.Topic += "/v2"
	require.NotEqual(t, mqttsrc.ClientID("a", &other), mqttsrc.ClientID("a", &moved))
}

// Dial errors name neither the URL nor its password.
func TestDialErrors(t *testing.T) {
	t.Parallel()
	src := &herald.Source{Name: fmt.Sprintf("e-%d", rand.Int64()), Type: herald.DestinationMQTT, Topic: "t"}
	for _, tc := range []struct{ url, want string }{
		{"mqtt://user:s3cret@127.0.0.1:1", "connecting to the MQTT broker"},
		{"http://user:s3cret@127.0.0.1:1883", "scheme"},
		{"mqtt://user:s3cret@%zz", "bad MQTT URL"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := mqttsrc.Dial(ctx, source.DialParams{Source: src, Node: "a", Prefetch: 1,
			Connection: &herald.Connection{Name: "c", Type: herald.DestinationMQTT, URL: tc.url}})
		cancel()
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "s3cret")
	}
}
