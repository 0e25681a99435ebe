package amqpsrc

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/source/sourcetest"
)

// harness adapts the local RabbitMQ to sourcetest.
type harness struct {
	url string
}

var (
	_ sourcetest.Harness     = (*harness)(nil)
	_ sourcetest.Restarter   = (*harness)(nil)
	_ sourcetest.DeadLetters = (*harness)(nil)
)

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{url: testbroker.URL(t, testbroker.AMQP)}
}

func (h *harness) Type() herald.DestinationType { return herald.DestinationAMQP }
func (h *harness) URL() string                  { return h.url }

// channel opens a connection and channel closed on cleanup.
func (h *harness) channel(t *testing.T) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(h.url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	return ch
}

// NewSource declares a durable queue whose dead-letter exchange (fanout)
// routes to <queue>.dead; both are deleted on cleanup.
func (h *harness) NewSource(t *testing.T) *herald.Source {
	t.Helper()
	queue := "herald-srctest-" + strings.ToLower(herald.NewID(""))
	dlx := queue + ".dlx"
	ch := h.channel(t)
	require.NoError(t, ch.ExchangeDeclare(dlx, amqp.ExchangeFanout, true, false, false, false, nil))
	_, err := ch.QueueDeclare(queue+".dead", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(queue+".dead", "", dlx, false, nil))
	_, err = ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-dead-letter-exchange": dlx})
	require.NoError(t, err)
	t.Cleanup(func() {
		// A fresh connection: the test's may have died with a restart.
		conn, err := amqp.Dial(h.url)
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		_, _ = ch.QueueDelete(queue, false, false, false)
		_, _ = ch.QueueDelete(queue+".dead", false, false, false)
		_ = ch.ExchangeDelete(dlx, false, false)
	})
	return &herald.Source{Type: herald.DestinationAMQP, Queue: queue}
}

// Publish sends msgs to the default exchange (routing key = the queue),
// persistent, and waits for every confirm.
func (h *harness) Publish(t *testing.T, src *herald.Source, msgs []sourcetest.Msg) {
	t.Helper()
	conn, err := amqp.Dial(h.url)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	confirms := make([]*amqp.DeferredConfirmation, 0, len(msgs))
	for _, m := range msgs {
		var hdr amqp.Table
		if len(m.Headers) > 0 {
			hdr = amqp.Table{}
			for k, v := range m.Headers {
				hdr[k] = v
			}
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", src.Queue, true, false, amqp.Publishing{
			Headers: hdr, DeliveryMode: amqp.Persistent, MessageId: m.ID, Body: m.Body,
		})
		require.NoError(t, err)
		confirms = append(confirms, dc)
	}
	for i, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		require.NoError(t, err)
		require.True(t, ok, "message %d not confirmed", i)
	}
}

// depth is the number of ready messages in queue.
func (h *harness) depth(t *testing.T, queue string) int {
	t.Helper()
	conn, err := amqp.Dial(h.url)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}

// DeadLetters counts the messages in the source's dead-letter queue.
func (h *harness) DeadLetters(t *testing.T, src *herald.Source) int {
	t.Helper()
	return h.depth(t, src.Queue+".dead")
}

// Restart stops and starts the RabbitMQ application (the Erlang VM stays
// up; durable queues and persistent messages survive), then waits until
// an AMQP dial succeeds.
func (h *harness) Restart(t *testing.T, down func()) {
	t.Helper()
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		t.Skip("SKIP: no rabbitmqctl to restart the broker")
	}
	started := false
	t.Cleanup(func() {
		if !started {
			startRabbit(t, h.url)
		}
	})
	rabbitmqctl(t, "stop_app")
	down()
	startRabbit(t, h.url)
	started = true
}

func rabbitmqctl(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("rabbitmqctl", args...).CombinedOutput()
	require.NoError(t, err, "rabbitmqctl %v: %s", args, out)
}

// startRabbit starts the RabbitMQ application and waits until it takes
// an AMQP connection (it accepts TCP before it completes a handshake).
func startRabbit(t *testing.T, url string) {
	t.Helper()
	rabbitmqctl(t, "start_app")
	rabbitmqctl(t, "await_startup", "--timeout", "120")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		conn, err := amqp.Dial(url)
		if err == nil {
			_ = conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("RabbitMQ takes no AMQP connection 2 minutes after start_app: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// connection is a herald.Connection to the test broker.
func (h *harness) connection() *herald.Connection {
	return &herald.Connection{Name: "rabbit", Type: herald.DestinationAMQP, URL: h.url}
}

// dialConsumer opens a consumer of src with prefetch as node.
func (h *harness) dialConsumer(t *testing.T, src *herald.Source, node string, prefetch int) *Consumer {
	t.Helper()
	if src.Name == "" {
		src.Name = "src-" + strings.ToLower(herald.NewID(""))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, sourceParams(h.connection(), src, node, prefetch))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
