package amqpsrc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/source"
	"github.com/heraldhq/herald/source/sourcetest"
)

func sourceParams(conn *herald.Connection, src *herald.Source, node string, prefetch int) source.DialParams {
	return source.DialParams{Source: src, Connection: conn, Node: node, Prefetch: prefetch}
}

// numbered are n messages {"id":"<prefix>-i","kind":"thing.happened"}.
func numbered(prefix string, n int) []sourcetest.Msg {
	msgs := make([]sourcetest.Msg, n)
	for i := range msgs {
		msgs[i] = sourcetest.Msg{Body: fmt.Appendf(nil, `{"id":"%s-%d","kind":"thing.happened"}`, prefix, i)}
	}
	return msgs
}

// receiveN receives until n messages arrived (without settling them),
// failing after 10 s; no single Receive may exceed max.
func receiveN(t *testing.T, c *Consumer, n, max int) []*source.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []*source.Message
	for len(got) < n {
		msgs, err := c.Receive(ctx, max)
		require.NoError(t, err, "received %d of %d", len(got), n)
		require.NotEmpty(t, msgs)
		require.LessOrEqual(t, len(msgs), max)
		got = append(got, msgs...)
	}
	require.Len(t, got, n)
	return got
}

// requireNothing checks that no message arrives within d (an absence can
// only be checked over a span of time).
func requireNothing(t *testing.T, c *Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	msgs, err := c.Receive(ctx, 100)
	require.ErrorIs(t, err, context.DeadlineExceeded, "got %d messages", len(msgs))
}

func waitDepth(t *testing.T, h *harness, queue string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := h.depth(t, queue)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s holds %d ready messages, want %d", queue, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With more messages waiting than the prefetch, the consumer never holds
// more than prefetch unsettled; settling lets the next ones come.
func TestPrefetchBound(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	const n, prefetch = 50, 10
	h.Publish(t, src, numbered("p", n))
	c := h.dialConsumer(t, src, "n1", prefetch)

	got := receiveN(t, c, prefetch, 100)
	requireNothing(t, c, 500*time.Millisecond)
	depth, ok := c.Pending(context.Background())
	require.True(t, ok)
	require.EqualValues(t, n-prefetch, depth, "the broker keeps what exceeds the prefetch")

	total := len(got)
	for total < n {
		require.NoError(t, c.Settle(context.Background(), got, nil))
		got = receiveN(t, c, min(prefetch, n-total), 100)
		total += len(got)
	}
	require.NoError(t, c.Settle(context.Background(), got, nil))
	waitDepth(t, h, src.Queue, 0)
	requireNothing(t, c, 300*time.Millisecond)
}

// With two batches unsettled (the runner receives the next while the
// previous commits), settling the older one acks it alone, in one
// multiple ack: the newer one stays unsettled and comes back after Close.
func TestSettleOlderBatchOfTwo(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	const batch = 5
	h.Publish(t, src, numbered("two", 2*batch))
	c := h.dialConsumer(t, src, "n1", 2*batch)
	older := receiveExactly(t, c, batch)
	newer := receiveExactly(t, c, batch)
	require.NoError(t, c.Settle(context.Background(), older, nil))
	require.NoError(t, c.Close())

	c2 := h.dialConsumer(t, src, "n2", 2*batch)
	again := receiveN(t, c2, batch, 2*batch)
	require.Equal(t, bodies(newer), bodies(again), "the newer batch, redelivered")
	for _, m := range again {
		require.True(t, m.Token.(Token).Redelivered)
	}
	require.NoError(t, c2.Settle(context.Background(), again, nil))
	waitDepth(t, h, src.Queue, 0)
	requireNothing(t, c2, 300*time.Millisecond)
}

// receiveExactly receives n messages, never asking for more.
func receiveExactly(t *testing.T, c *Consumer, n int) []*source.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []*source.Message
	for len(got) < n {
		msgs, err := c.Receive(ctx, n-len(got))
		require.NoError(t, err, "received %d of %d", len(got), n)
		got = append(got, msgs...)
	}
	return got
}

func bodies(msgs []*source.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

// Receive returns what is there without waiting to fill max.
func TestReceiveDoesNotLinger(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	c := h.dialConsumer(t, src, "n1", 100)
	h.Publish(t, src, numbered("one", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	msgs, err := c.Receive(ctx, 100)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Less(t, time.Since(start), 5*time.Second)
	require.NoError(t, c.Settle(ctx, msgs, nil))
}

// Receive takes every delivery that already arrived, up to max, in one
// batch (one commit), not the one or two the driver's unbuffered
// hand-over would give a non-blocking drain.
func TestReceiveTakesWhatArrived(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	c := h.dialConsumer(t, src, "n1", 256)
	h.Publish(t, src, numbered("b", 200))
	deadline := time.Now().Add(10 * time.Second)
	for len(c.deliveries) < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 200 deliveries arrived after 10 s", len(c.deliveries))
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx := context.Background()
	first, err := c.Receive(ctx, 50)
	require.NoError(t, err)
	require.Len(t, first, 50, "max bounds a batch")
	rest, err := c.Receive(ctx, 256)
	require.NoError(t, err)
	require.Len(t, rest, 150, "one batch takes what arrived")
	for i, m := range append(first, rest...) {
		require.Equal(t, fmt.Sprintf(`{"id":"b-%d","kind":"thing.happened"}`, i), string(m.Body), "receive order")
	}
	require.NoError(t, c.Settle(ctx, append(first, rest...), nil))
	waitDepth(t, h, src.Queue, 0)
}

// Body, headers (stringified), routing key, message id and timestamp.
func TestMessageFields(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	ch := h.channel(t)
	ts := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	body := []byte(`{"a":"é"}`)
	err := ch.PublishWithContext(context.Background(), "", src.Queue, false, false, amqp.Publishing{
		Body: body, MessageId: "msg-1", Timestamp: ts, DeliveryMode: amqp.Persistent,
		Headers: amqp.Table{
			"s": "text", "i": int32(-42), "l": int64(1 << 40), "b": true, "f": 1.5,
			"bytes": []byte("raw"), "d": amqp.Decimal{Scale: 2, Value: -1234},
			"t": ts, "nested": amqp.Table{"k": "v", "n": int32(1)}, "arr": []any{"x", int32(2)},
		},
	})
	require.NoError(t, err)
	c := h.dialConsumer(t, src, "n1", 10)
	m := receiveN(t, c, 1, 10)[0]
	require.Equal(t, body, m.Body)
	require.Equal(t, src.Queue, m.Route)
	require.Equal(t, "msg-1", m.MessageID)
	require.True(t, m.Timestamp.Equal(ts), "timestamp %v", m.Timestamp)
	require.Equal(t, map[string]string{
		"s": "text", "i": "-42", "l": "1099511627776", "b": "true", "f": "1.5", "bytes": "raw",
		"d": "-12.34", "t": herald.FormatTime(ts), "nested": `{"k":"v","n":1}`, "arr": `["x",2]`,
	}, m.Headers)
	tok, ok := m.Token.(Token)
	require.True(t, ok)
	require.False(t, tok.Redelivered)
	require.NoError(t, c.Settle(context.Background(), []*source.Message{m}, nil))
}

// A consumer that closes after its events committed but before it acked
// (a crash): RabbitMQ redelivers every message to the next consumer,
// flagged redelivered, and each event is then a duplicate of the stored
// one, whether its id is the message id or the body's hash.
func TestRedeliveredAfterCloseBecomesDuplicate(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	src.Name = "redeliver"
	msgs := []sourcetest.Msg{
		{Body: []byte(`{"x":1}`), ID: "mid-1"},
		{Body: []byte(`{"x":2}`), ID: "mid-2"},
		{Body: []byte(`{"x":3}`)},
		{Body: []byte(`{"x":4}`)},
	}
	h.Publish(t, src, msgs)

	st := testdb.SQLite(t)
	ing := ingest.New(ingest.Config{Store: st})
	ing.Start()
	t.Cleanup(ing.Close)
	conv, err := source.NewConverter(src, httpapi.DecodeEvent, 0)
	require.NoError(t, err)
	commit := func(ms []*source.Message) []bool {
		evs := make([]*herald.Event, len(ms))
		for i, m := range ms {
			ev, rj := conv.Convert(m)
			require.Nil(t, rj)
			evs[i] = ev
		}
		res, err := ing.PublishMany(context.Background(), evs)
		require.NoError(t, err)
		dup := make([]bool, len(res))
		for i, r := range res {
			dup[i] = r.Duplicate
		}
		return dup
	}

	c1 := h.dialConsumer(t, src, "n1", 10)
	first := receiveN(t, c1, len(msgs), 10)
	require.Equal(t, []bool{false, false, false, false}, commit(first))
	require.NoError(t, c1.Close()) // no Settle

	c2 := h.dialConsumer(t, src, "n2", 10)
	again := receiveN(t, c2, len(msgs), 10)
	for i, m := range again {
		require.Equal(t, string(first[i].Body), string(m.Body))
		require.Equal(t, first[i].MessageID, m.MessageID)
		require.True(t, m.Token.(Token).Redelivered, "message %d flagged redelivered", i)
	}
	require.Equal(t, []bool{true, true, true, true}, commit(again), "every redelivery is a duplicate")
	require.NoError(t, c2.Settle(context.Background(), again, nil))
	require.NoError(t, c2.Close())
	waitDepth(t, h, src.Queue, 0)
}

// Rejected messages go to the dead-letter exchange and are never
// redelivered; acked ones are gone.
func TestRejectedNotRedelivered(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	h.Publish(t, src, numbered("r", 4))
	c := h.dialConsumer(t, src, "n1", 10)
	got := receiveN(t, c, 4, 10)
	require.NoError(t, c.Settle(context.Background(), []*source.Message{got[0], got[2]}, []*source.Message{got[1], got[3]}))
	waitDepth(t, h, src.Queue+".dead", 2)
	require.NoError(t, c.Close())

	c2 := h.dialConsumer(t, src, "n2", 10)
	requireNothing(t, c2, 500*time.Millisecond)
	n, ok := c2.Pending(context.Background())
	require.True(t, ok)
	require.Zero(t, n)
	require.Equal(t, 2, h.DeadLetters(t, src))

	ch := h.channel(t)
	var dead []string
	for range 2 {
		d, ok, err := ch.Get(src.Queue+".dead", true)
		require.NoError(t, err)
		require.True(t, ok)
		dead = append(dead, string(d.Body))
	}
	require.ElementsMatch(t, []string{string(got[1].Body), string(got[3].Body)}, dead)
}

// Settling a message this consumer does not hold is an error, not an ack
// of an unknown tag (which would close the channel).
func TestSettleUnknown(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	h.Publish(t, src, numbered("u", 1))
	c := h.dialConsumer(t, src, "n1", 10)
	m := receiveN(t, c, 1, 10)[0]
	require.Error(t, c.Settle(context.Background(), []*source.Message{{Token: Token{Tag: 999}}}, nil))
	require.Error(t, c.Settle(context.Background(), []*source.Message{{Token: "x"}}, nil))
	require.Error(t, c.Settle(context.Background(), []*source.Message{m, m}, nil))
	require.Error(t, c.Settle(context.Background(), []*source.Message{m}, []*source.Message{m}))
	require.NoError(t, c.Settle(context.Background(), []*source.Message{m}, nil))
	require.Error(t, c.Settle(context.Background(), []*source.Message{m}, nil), "settled twice")
	waitDepth(t, h, src.Queue, 0)
}

func TestDialMissingQueue(t *testing.T) {
	h := newHarness(t)
	src := &herald.Source{Name: "missing", Type: herald.DestinationAMQP, Queue: "herald-srctest-missing-" + strings.ToLower(herald.NewID(""))}
	_, err := Dial(context.Background(), sourceParams(h.connection(), src, "n1", 10))
	require.Error(t, err)
	require.Contains(t, err.Error(), fmt.Sprintf("queue %q does not exist", src.Queue))
	t.Log(err)
}

// Dial errors never show the URL's password.
func TestDialErrorsHideURL(t *testing.T) {
	h := newHarness(t)
	src := &herald.Source{Name: "s", Type: herald.DestinationAMQP, Queue: "q"}
	const secret = "s3cr3t-pw"
	host := strings.TrimPrefix(h.url, "amqp://")
	host = host[strings.Index(host, "@")+1:]
	for name, tc := range map[string]struct{ url, want string }{
		"credentials": {"amqp://guest:" + secret + "@" + host, "refused the credentials"},
		"refused":     {"amqp://guest:" + secret + "@127.0.0.1:1/", "connection refused"},
		"scheme":      {"amqpx://guest:" + secret + "@127.0.0.1/", "bad URL"},
		"escape":      {"amqp://guest:%zz" + secret + "@127.0.0.1/", "bad URL"},
	} {
		t.Run(name, func(t *testing.T) {
			conn := &herald.Connection{Name: "rabbit", Type: herald.DestinationAMQP, URL: tc.url}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Dial(ctx, sourceParams(conn, src, "n1", 10))
			require.Error(t, err)
			require.NotContains(t, err.Error(), secret)
			require.Contains(t, err.Error(), tc.want)
			require.Contains(t, err.Error(), `connection "rabbit"`)
			t.Log(err)
		})
	}
}

// Receive returns an error, rather than waiting, when the broker cancels
// the consumer (its queue was deleted).
func TestReceiveErrorsWhenQueueDeleted(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	c := h.dialConsumer(t, src, "n1", 10)
	errs := make(chan error, 1)
	go func() {
		_, err := c.Receive(context.Background(), 10)
		errs <- err
	}()
	_, err := h.channel(t).QueueDelete(src.Queue, false, false, false)
	require.NoError(t, err)
	select {
	case err := <-errs:
		require.Error(t, err)
		require.Contains(t, err.Error(), "cancelled the consumer")
	case <-time.After(10 * time.Second):
		t.Fatal("Receive still waits 10 s after the queue was deleted")
	}
}

// Receive returns an error when the broker closes the connection
// (rabbitmqctl close_connection, as an operator or a failover would); a
// Settle after it fails too, and the next consumer gets the message again.
func TestBrokerClosesConnection(t *testing.T) {
	h := newHarness(t)
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		t.Skip("SKIP: no rabbitmqctl to close the connection")
	}
	src := h.NewSource(t)
	src.Name = "closeme-" + strings.ToLower(herald.NewID(""))
	h.Publish(t, src, numbered("c", 1))
	c := h.dialConsumer(t, src, "n1", 10)
	held := receiveN(t, c, 1, 10)
	errs := make(chan error, 1)
	go func() {
		_, err := c.Receive(context.Background(), 10)
		errs <- err
	}()
	closeConnection(t, src.Name)
	select {
	case err := <-errs:
		require.Error(t, err)
		require.Contains(t, err.Error(), "closed")
		var aerr *amqp.Error
		require.False(t, errors.As(err, &aerr), "a message, not the driver's error")
		t.Log(err)
	case <-time.After(10 * time.Second):
		t.Fatal("Receive still waits 10 s after the broker closed the connection")
	}
	err := c.Settle(context.Background(), held, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), "redelivers")
	t.Log(err)

	c2 := h.dialConsumer(t, src, "n2", 10)
	again := receiveN(t, c2, 1, 10)
	require.Equal(t, string(held[0].Body), string(again[0].Body))
	require.True(t, again[0].Token.(Token).Redelivered)
	require.NoError(t, c2.Settle(context.Background(), again, nil))
}

// closeConnection closes, broker side, the connection named after the
// source (connection_name "herald source <name> (node ...)").
func closeConnection(t *testing.T, name string) {
	t.Helper()
	out, err := exec.Command("rabbitmqctl", "list_connections", "pid", "client_properties", "-q", "--no-table-headers").CombinedOutput()
	require.NoError(t, err, "%s", out)
	var pid string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "herald source "+name+" ") {
			pid = strings.Fields(line)[0]
		}
	}
	require.NotEmpty(t, pid, "no connection named after %s in %s", name, out)
	out, err = exec.Command("rabbitmqctl", "close_connection", pid, "herald test").CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// Dial gives up when its context ends, whatever the broker does.
func TestDialHonoursContext(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Dial(ctx, sourceParams(h.connection(), src, "n1", 10))
	require.Error(t, err)
}
