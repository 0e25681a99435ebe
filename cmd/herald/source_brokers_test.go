package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testbroker"
)

// This file holds the brokers as the source tests drive them: the queue,
// stream or topic a herald source reads, and a publisher that uses the
// broker's own client library and returns only once the broker holds
// every message durably (AMQP publisher confirms on a durable queue with
// persistent messages, JetStream publish acks, Redis XADD replies, MQTT
// QoS 1 PUBACKs).

// srcBroker is one broker queue, stream or topic a source reads.
type srcBroker struct {
	kind testbroker.Kind
	url  string
	// fields are the source's broker fields (queue, stream, topic).
	fields map[string]any
	// publish hands every body to the broker and returns once each is
	// durably held. A failed call may have delivered some of them: the
	// caller publishes the same bodies again (their ids make the copies
	// duplicates). It reconnects by itself after a broken connection.
	publish func(ctx context.Context, bodies [][]byte) error
	// window bounds how far the stream publisher runs ahead of what herald
	// stored, and so stops it while herald is down: a disruption lands
	// mid-publish as well as mid-consume. MQTT's is small: mosquitto
	// queues at most max_queued_messages (1000) per session beyond those
	// in flight and drops the rest, online or not.
	window int
}

// srcWindow is the stream publisher's window on brokers that keep any
// backlog.
const srcWindow = 4000

// newSrcBroker makes a fresh queue, stream or topic on kind's broker,
// named with suffix, and a publisher for it; both go at the test's end.
func newSrcBroker(t *testing.T, kind testbroker.Kind, suffix string) *srcBroker {
	t.Helper()
	u := testbroker.URL(t, kind)
	switch kind {
	case testbroker.AMQP:
		q := "herald-src-" + suffix
		declareAMQP(t, u, "", q)
		return &srcBroker{kind: kind, url: u, fields: map[string]any{"queue": q}, window: srcWindow,
			publish: amqpPublisher(t, u, "", func(int) string { return q })}
	case testbroker.NATS:
		return natsBroker(t, u, suffix)
	case testbroker.Redis:
		return redisBroker(t, u, suffix)
	case testbroker.MQTT:
		return mqttBroker(t, u, suffix)
	}
	t.Fatalf("unknown broker %s", kind)
	return nil
}

// declareAMQP declares a durable queue (deleted at the test's end), bound
// with "#" to the topic exchange exchange when it is not "" (declared
// durable too, and deleted at the end).
func declareAMQP(t *testing.T, u, exchange, queue string) {
	t.Helper()
	conn, err := amqp.Dial(u)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
	require.NoError(t, err)
	if exchange != "" {
		require.NoError(t, ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil))
		require.NoError(t, ch.QueueBind(queue, "#", exchange, false, nil))
	}
	t.Cleanup(func() {
		// The broker may have been restarted meanwhile: a fresh connection.
		c, err := amqp.Dial(u)
		if err != nil {
			return
		}
		defer c.Close()
		if ch, err := c.Channel(); err == nil {
			_, _ = ch.QueueDelete(queue, false, false, false)
			if exchange != "" {
				_ = ch.ExchangeDelete(exchange, false, false)
			}
		}
	})
}

// amqpPublisher publishes persistent messages with publisher confirms to
// exchange ("" is the default exchange), the i-th of a call with routing
// key route(i). Each publisher holds its own connection, redialled after
// an error.
func amqpPublisher(t *testing.T, u, exchange string, route func(i int) string) func(context.Context, [][]byte) error {
	var (
		mu   sync.Mutex
		conn *amqp.Connection
		ch   *amqp.Channel
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if conn != nil {
			_ = conn.Close()
		}
	})
	return func(ctx context.Context, bodies [][]byte) error {
		mu.Lock()
		defer mu.Unlock()
		if conn == nil || conn.IsClosed() || ch == nil || ch.IsClosed() {
			if conn != nil {
				_ = conn.Close()
			}
			var err error
			if conn, err = amqp.Dial(u); err != nil {
				conn = nil
				return err
			}
			if ch, err = conn.Channel(); err == nil {
				err = ch.Confirm(false)
			}
			if err != nil {
				_ = conn.Close()
				conn = nil
				return err
			}
		}
		confirms := make([]*amqp.DeferredConfirmation, 0, len(bodies))
		for i, b := range bodies {
			c, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, route(i), false, false, amqp.Publishing{
				ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: b,
			})
			if err != nil {
				return err
			}
			confirms = append(confirms, c)
		}
		for _, c := range confirms {
			ok, err := c.WaitContext(ctx)
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("amqp: the broker nacked a message")
			}
		}
		return nil
	}
}

func natsBroker(t *testing.T, u, suffix string) *srcBroker {
	t.Helper()
	nc, err := nats.Connect(u, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream, subject := "HERALD_SRC_"+strings.ToUpper(suffix), "herald.src."+suffix
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	return &srcBroker{kind: testbroker.NATS, url: u, fields: map[string]any{"stream": stream}, window: srcWindow,
		publish: func(ctx context.Context, bodies [][]byte) error {
			futures := make([]jetstream.PubAckFuture, 0, len(bodies))
			for _, b := range bodies {
				f, err := js.PublishAsync(subject, b)
				if err != nil {
					return err
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}}
}

// redisBroker uses a stream on a server that runs without persistence
// (.ci/run): the tests never restart it.
func redisBroker(t *testing.T, u, suffix string) *srcBroker {
	t.Helper()
	opt, err := redis.ParseURL(u)
	require.NoError(t, err)
	rdb := redis.NewClient(opt)
	stream := "herald-src-" + suffix
	t.Cleanup(func() {
		rdb.Del(context.Background(), stream, stream+":rejected")
		_ = rdb.Close()
	})
	return &srcBroker{kind: testbroker.Redis, url: u, fields: map[string]any{"stream": stream}, window: srcWindow,
		publish: func(ctx context.Context, bodies [][]byte) error {
			p := rdb.Pipeline()
			for _, b := range bodies {
				p.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"body", string(b)}})
			}
			_, err := p.Exec(ctx)
			return err
		}}
}

// mqttBroker publishes with QoS 1 on one topic under a fresh prefix; the
// source subscribes to prefix/#.
func mqttBroker(t *testing.T, u, suffix string) *srcBroker {
	t.Helper()
	pu, err := url.Parse(u)
	require.NoError(t, err)
	prefix := "herald/src/" + suffix
	var (
		mu sync.Mutex
		c  *paho.Client
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if c != nil {
			_ = c.Disconnect(&paho.Disconnect{ReasonCode: 0})
		}
	})
	return &srcBroker{kind: testbroker.MQTT, url: u, fields: map[string]any{"topic": prefix + "/#"}, window: 300,
		publish: func(ctx context.Context, bodies [][]byte) error {
			mu.Lock()
			defer mu.Unlock()
			if c == nil {
				conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", pu.Host)
				if err != nil {
					return err
				}
				nc := paho.NewClient(paho.ClientConfig{Conn: conn})
				if _, err := nc.Connect(ctx, &paho.Connect{ClientID: "herald-src-pub-" + suffix, KeepAlive: 30, CleanStart: true}); err != nil {
					_ = conn.Close()
					return err
				}
				c = nc
			}
			for _, b := range bodies {
				if _, err := c.Publish(ctx, &paho.Publish{QoS: 1, Topic: prefix + "/m", Payload: b}); err != nil {
					_ = c.Disconnect(&paho.Disconnect{ReasonCode: 0})
					c = nil
					return err
				}
			}
			return nil
		}}
}

// rabbitRestart restarts the RabbitMQ application (the Erlang node stays
// up, durable queues and persistent messages survive) and waits until it
// accepts clients again. Only the tests that own a RabbitMQ restart call
// it.
func rabbitRestart(t *testing.T, down time.Duration) {
	t.Helper()
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command("rabbitmqctl", args...).CombinedOutput()
		require.NoError(t, err, "rabbitmqctl %s: %s", strings.Join(args, " "), out)
	}
	run("stop_app")
	// Start it again even when the test fails meanwhile: other tests share
	// the broker.
	restarted := false
	defer func() {
		if !restarted {
			_ = exec.Command("rabbitmqctl", "start_app").Run()
		}
	}()
	time.Sleep(down) // the broker stays down a while: consumers see it
	run("start_app")
	restarted = true
	run("await_startup", "--timeout", "120")
	require.NoError(t, testbroker.WaitUp("127.0.0.1:5672", 60*time.Second), "RabbitMQ did not come back")
}

// msgID is the test's id of message i, the event id the mapping takes.
func msgID(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

// natsRestart stops the machine's nats-server (JetStream keeps its streams
// on disk), keeps it down for down, starts it as .ci/run does and waits
// until JetStream answers. Only the tests that own a NATS restart call it.
func natsRestart(t *testing.T, down time.Duration) {
	t.Helper()
	u := testbroker.URL(t, testbroker.NATS)
	pu, err := url.Parse(u)
	require.NoError(t, err)
	addr := pu.Host
	start := func() error {
		out, err := exec.Command("start-stop-daemon", "--start", "--oknodo", "--background", "--exec", "/usr/sbin/nats-server", "--",
			"-a", "127.0.0.1", "-p", "4222", "-js", "-sd", "/var/lib/nats-server", "-l", "/var/log/nats-server.log").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	out, err := exec.Command("start-stop-daemon", "--stop", "--oknodo", "--retry", "TERM/20/KILL/5", "--exec", "/usr/sbin/nats-server").CombinedOutput()
	require.NoError(t, err, "stopping nats-server: %s", out)
	restarted := false
	defer func() {
		if !restarted {
			_ = start() // other tests share the broker
		}
	}()
	waitFor(t, 30*time.Second, func() (bool, string) { return testbroker.WaitUp(addr, 0) != nil, "still accepting" },
		func(last string) string { return "nats-server did not stop: " + last })
	time.Sleep(down) // the broker stays down a while: consumers see it
	require.NoError(t, start(), "starting nats-server")
	restarted = true
	waitFor(t, 60*time.Second, func() (bool, string) {
		nc, err := nats.Connect(u, nats.Timeout(time.Second))
		if err != nil {
			return false, err.Error()
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false, err.Error()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := js.AccountInfo(ctx); err != nil {
			return false, err.Error()
		}
		return true, ""
	}, func(last string) string { return "JetStream is not back: " + last })
}
