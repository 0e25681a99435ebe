package amqpdest_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/destination"
	amqpdest "github.com/heraldhq/herald/destination/amqp"
	"github.com/heraldhq/herald/destination/desttest"
	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/webhook"
)

// TestMain drops the PostgreSQL schemas testdb may have pooled.
func TestMain(m *testing.M) { testdb.Main(m) }

const connName = "rabbit-test"

// harness adapts RabbitMQ to desttest: each Target is a topic exchange of
// its own with a queue bound for every routing key ("#"), read by a
// consumer on a connection of the test's.
type harness struct {
	url   string
	conns *destination.Static
	admin *amqp.Connection
}

func newHarness(t *testing.T) *harness {
	u := testbroker.URL(t, testbroker.AMQP)
	admin, err := amqp.Dial(u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	return &harness{url: u, admin: admin, conns: destination.NewStatic(&herald.Connection{
		Name: connName, Type: herald.DestinationAMQP, URL: u, AllTenants: true})}
}

func (h *harness) Type() herald.DestinationType { return herald.DestinationAMQP }

func (h *harness) Publisher(t *testing.T) destination.Publisher {
	return amqpdest.New(amqpdest.Config{Connections: h.conns, BackoffMax: time.Second})
}

// channel is a channel of the test's own connection.
func (h *harness) channel(t *testing.T) *amqp.Channel {
	t.Helper()
	ch, err := h.admin.Channel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// declare makes an exchange and, when bind, a queue bound to it for every
// routing key; both are deleted on cleanup.
func (h *harness) declare(t *testing.T, durable, bind bool) (exchange, queue string) {
	t.Helper()
	id := strings.ToLower(herald.NewID(""))
	exchange, queue = "desttest.x"+id, "desttest.q"+id
	ch := h.channel(t)
	require.NoError(t, ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, durable, false, false, false, nil))
	t.Cleanup(func() {
		ch, err := h.admin.Channel()
		if err == nil {
			_, _ = ch.QueueDelete(queue, false, false, false)
			_ = ch.ExchangeDelete(exchange, false, false)
			_ = ch.Close()
		}
	})
	if bind {
		_, err := ch.QueueDeclare(queue, durable, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.QueueBind(queue, "#", exchange, false, nil))
	}
	return exchange, queue
}

func (h *harness) dest(exchange string) herald.Destination {
	return herald.Destination{Type: herald.DestinationAMQP, Connection: connName, Exchange: exchange}
}

func (h *harness) Target(t *testing.T) (herald.Destination, desttest.Consumer) {
	exchange, queue := h.declare(t, false, true)
	deliveries, err := h.channel(t).Consume(queue, "", true, false, false, false, nil)
	require.NoError(t, err)
	return h.dest(exchange), consumer(deliveries)
}

// Broken is an exchange with no queue bound: a mandatory publish is
// returned, so the attempt fails as unroutable.
func (h *harness) Broken(t *testing.T) (herald.Destination, herald.ErrorClass, bool) {
	exchange, _ := h.declare(t, false, false)
	return h.dest(exchange), herald.ErrorUnroutable, true
}

type consumer <-chan amqp.Delivery

func (c consumer) Next(ctx context.Context) (*desttest.Received, error) {
	select {
	case d, ok := <-c:
		if !ok {
			return nil, errors.New("consumer channel closed")
		}
		return received(d), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func received(d amqp.Delivery) *desttest.Received {
	r := &desttest.Received{Headers: map[string]string{}, Body: d.Body}
	for k, v := range d.Headers {
		r.Headers[k] = fmt.Sprint(v)
	}
	return r
}

func TestConformance(t *testing.T) {
	desttest.Run(t, newHarness(t))
}

func request(d herald.Destination, timeout time.Duration) *webhook.Request {
	return &webhook.Request{
		Body: []byte(`{"id":"evt_1","type":"order.created","data":{}}`), MsgID: herald.NewID(herald.PrefixDelivery),
		Secrets: []string{desttest.TestSecret}, Attempt: 1, EventType: "order.created", Timeout: timeout,
		Timestamp: time.Now(), Destination: d,
	}
}

// The message's AMQP properties: persistent, JSON, MessageId = event id,
// and the routing key defaults to the event type.
func TestMessageProperties(t *testing.T) {
	h := newHarness(t)
	pub := h.Publisher(t)
	defer pub.Close()
	exchange, queue := h.declare(t, false, false)
	ch := h.channel(t)
	_, err := ch.QueueDeclare(queue, false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(queue, "order.created", exchange, false, nil))
	deliveries, err := ch.Consume(queue, "", true, false, false, false, nil)
	require.NoError(t, err)

	req := request(h.dest(exchange), 5*time.Second)
	req.EventID = "evt_1"
	res := pub.Send(context.Background(), req)
	require.True(t, res.Success, "%s: %s", res.Class, res.Message)
	select {
	case d := <-deliveries:
		require.Equal(t, uint8(amqp.Persistent), d.DeliveryMode)
		require.Equal(t, "application/json", d.ContentType)
		require.Equal(t, "evt_1", d.MessageId)
		require.Equal(t, req.MsgID, d.Headers["webhook-id"])
		require.Equal(t, "order.created", d.RoutingKey, "routing key defaults to the event type")
		require.Equal(t, "order.created", d.Type)
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
	}
}

// A publish to a missing exchange makes RabbitMQ close the channel (404);
// publishes of other subscriptions running at the same time are not hurt.
func TestChannelErrorIsolated(t *testing.T) {
	h := newHarness(t)
	pub := h.Publisher(t)
	defer pub.Close()
	good, c := h.Target(t)
	missing := h.dest("desttest.missing." + strings.ToLower(herald.NewID("")))

	const n = 30
	var wg sync.WaitGroup
	results := make([]webhook.Result, 2*n)
	for i := range 2 * n {
		d := good
		if i%2 == 1 {
			d = missing
		}
		wg.Go(func() { results[i] = pub.Send(context.Background(), request(d, 10*time.Second)) })
	}
	wg.Wait()
	for i, res := range results {
		if i%2 == 0 {
			require.True(t, res.Success, "publish %d to the good exchange: %s: %s", i, res.Class, res.Message)
			continue
		}
		require.False(t, res.Success)
		require.Equal(t, herald.ErrorBroker, res.Class, "publish %d: %s", i, res.Message)
		require.Contains(t, res.Message, "NOT_FOUND")
	}
	msgs := desttest.Drain(t, c, n, 20*time.Second)
	distinct, dups := desttest.Distinct(msgs)
	require.Equal(t, n, distinct)
	require.Empty(t, dups)
}

// A broker that is down fails the attempt at once (refused) or at the
// attempt's timeout (a server that accepts and never answers), and never
// holds a publish to another connection.
func TestBrokerDown(t *testing.T) {
	h := newHarness(t)
	// A listener that accepts and never speaks AMQP: the handshake hangs.
	silent := desttest.NewHoldingServer(t)
	refusedAddr := desttest.RefusedAddr(t)

	h.conns.Put(&herald.Connection{Name: "silent", Type: herald.DestinationAMQP, URL: "amqp://guest:guest@" + silent.Addr + "/", AllTenants: true})
	h.conns.Put(&herald.Connection{Name: "refused", Type: herald.DestinationAMQP, URL: "amqp://guest:secretpw@" + refusedAddr + "/", AllTenants: true})
	pub := amqpdest.New(amqpdest.Config{Connections: h.conns, DialTimeout: time.Minute})
	defer pub.Close()

	res := pub.Send(context.Background(), request(herald.Destination{Type: herald.DestinationAMQP, Connection: "refused"}, 5*time.Second))
	require.Equal(t, herald.ErrorConnection, res.Class, res.Message)
	require.NotContains(t, res.Message, "secretpw")

	silentDone := make(chan webhook.Result, 1)
	go func() {
		silentDone <- pub.Send(context.Background(), request(herald.Destination{Type: herald.DestinationAMQP, Connection: "silent"}, 3*time.Second))
	}()
	// While the silent broker's dial hangs, the good broker delivers.
	good, c := h.Target(t)
	for range 5 {
		res := pub.Send(context.Background(), request(good, 10*time.Second))
		require.True(t, res.Success, "%s: %s", res.Class, res.Message)
		select {
		case r := <-silentDone:
			t.Fatalf("the silent broker's attempt ended before the good ones: %+v", r)
		default:
		}
	}
	desttest.Drain(t, c, 5, 10*time.Second)
	r := <-silentDone
	require.Equal(t, herald.ErrorTimeout, r.Class, r.Message)
}

// A connection whose URL changes is dialled again with the new URL.
func TestURLChangeRedials(t *testing.T) {
	h := newHarness(t)
	pub := h.Publisher(t)
	defer pub.Close()
	d, c := h.Target(t)
	send := func() webhook.Result { return pub.Send(context.Background(), request(d, 5*time.Second)) }
	require.True(t, send().Success)

	h.conns.Put(&herald.Connection{Name: connName, Type: herald.DestinationAMQP, URL: "amqp://guest:wrong@" + strings.TrimPrefix(h.url, "amqp://guest:guest@"), AllTenants: true})
	res := send()
	require.Equal(t, herald.ErrorConnection, res.Class, "the new URL (wrong password) was dialled: %s", res.Message)

	h.conns.Put(&herald.Connection{Name: connName, Type: herald.DestinationAMQP, URL: h.url, AllTenants: true})
	require.Eventually(t, func() bool { return send().Success }, 20*time.Second, 100*time.Millisecond)
	require.GreaterOrEqual(t, len(desttest.Drain(t, c, 2, 10*time.Second)), 2)
}

func rabbitmqctl(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput()
	require.NoError(t, err, "rabbitmqctl %s: %s", strings.Join(args, " "), out)
}

// startRabbit starts the RabbitMQ app and waits until it answers.
func startRabbit(t *testing.T) {
	rabbitmqctl(t, "start_app")
	rabbitmqctl(t, "await_startup", "--timeout", "120")
	require.NoError(t, testbroker.WaitUp("127.0.0.1:5672", time.Minute))
}

// TestBrokerRestart publishes a steady stream of events through a real
// engine while RabbitMQ's app is stopped and started again: every event
// ends delivered and is in the (durable) queue. RabbitMQ has no publish
// dedupe: a publish whose confirm was lost with the connection is sent
// again, so the queue may hold duplicates (same webhook-id); they are
// counted and logged, not failed.
func TestBrokerRestart(t *testing.T) {
	h := newHarness(t)
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		t.Skip("SKIP: no rabbitmqctl to stop the broker")
	}
	t.Cleanup(func() { startRabbit(t) })
	exchange, queue := h.declare(t, true, true)
	pub := h.Publisher(t)
	defer pub.Close()
	tiers := delivery.Tiers{0, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second,
		10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	rig := desttest.NewRig(t, herald.DestinationAMQP, pub, tiers)
	sub := rig.Subscribe(t, h.dest(exchange), nil)

	const batches, perBatch = 30, 10
	typ := "desttest.restart." + strings.ToLower(herald.NewID(""))
	for b := range batches {
		evs := make([]desttest.Event, perBatch)
		for i := range evs {
			evs[i] = desttest.Event{Type: typ, Seq: b*perBatch + i}
		}
		rig.Publish(t, []*herald.Subscription{sub}, evs...)
		if b == batches/3 {
			t.Log("stopping RabbitMQ (rabbitmqctl stop_app)")
			rabbitmqctl(t, "stop_app")
		}
		if b == 2*batches/3 {
			t.Log("starting RabbitMQ (rabbitmqctl start_app)")
			startRabbit(t)
		}
		time.Sleep(50 * time.Millisecond) // the stream's pace, not a wait for work
	}
	const n = batches * perBatch
	retried := rig.AllDelivered(t, sub.ID, n, 3*time.Minute)

	// The test's connection died with the app: read the queue on a new one.
	admin, err := amqp.Dial(h.url)
	require.NoError(t, err)
	defer admin.Close()
	ch, err := admin.Channel()
	require.NoError(t, err)
	deliveries, err := ch.Consume(queue, "", true, false, false, false, nil)
	require.NoError(t, err)
	t.Logf("failed attempts during the outage, by class: %v", rig.FailedAttempts(t, sub.ID))
	msgs := desttest.Drain(t, consumer(deliveries), n, time.Minute)
	distinct, dups := desttest.Distinct(msgs)
	t.Logf("RabbitMQ restart: %d events, %d messages in the queue, %d distinct webhook-ids, %d duplicated ids %v (RabbitMQ has no publish dedupe: a re-sent publish whose confirm was lost is a duplicate; consumers drop it by webhook-id), %d deliveries retried",
		n, len(msgs), distinct, len(dups), dups, retried)
	require.Equal(t, n, distinct, "every event delivered")
	_ = ch.Close()
	// Delete the durable queue and exchange on a live connection (the
	// cleanup's connection died with the app).
	ch2, err := admin.Channel()
	require.NoError(t, err)
	_, _ = ch2.QueueDelete(queue, false, false, false)
	_ = ch2.ExchangeDelete(exchange, false, false)
}

// A queue that rejects publishes when full (x-overflow reject-publish,
// x-max-length 0) makes the broker nack: the attempt fails as broker, and
// the channel stays usable for the next publish.
func TestNack(t *testing.T) {
	h := newHarness(t)
	pub := h.Publisher(t)
	defer pub.Close()
	exchange, queue := h.declare(t, false, false)
	ch := h.channel(t)
	_, err := ch.QueueDeclare(queue, false, false, false, false,
		amqp.Table{"x-max-length": int32(0), "x-overflow": "reject-publish"})
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(queue, "#", exchange, false, nil))
	for range 3 {
		res := pub.Send(context.Background(), request(h.dest(exchange), 5*time.Second))
		require.False(t, res.Success)
		require.Equal(t, herald.ErrorBroker, res.Class, res.Message)
		require.Contains(t, res.Message, "nack")
	}
	good, c := h.Target(t)
	res := pub.Send(context.Background(), request(good, 5*time.Second))
	require.True(t, res.Success, "%s: %s", res.Class, res.Message)
	desttest.Drain(t, c, 1, 10*time.Second)
}

// Close ends the connection; a later attempt fails instead of dialling
// again (the node is shutting down).
func TestSendAfterClose(t *testing.T) {
	h := newHarness(t)
	pub := h.Publisher(t)
	d, c := h.Target(t)
	require.True(t, pub.Send(context.Background(), request(d, 5*time.Second)).Success)
	desttest.Drain(t, c, 1, 10*time.Second)
	pub.Close()
	res := pub.Send(context.Background(), request(d, 5*time.Second))
	require.False(t, res.Success)
	require.Equal(t, herald.ErrorConnection, res.Class, res.Message)
}
