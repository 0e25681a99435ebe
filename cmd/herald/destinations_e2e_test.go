package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/webhook"
)

// brokerMsg is one message as a broker consumer got it.
type brokerMsg struct {
	headers map[string]string
	body    []byte
}

// TestDestinationsBinary is the README's "Destinations" path through the
// real binary: an admin creates one connection per broker on the machine
// (RabbitMQ, NATS JetStream, Redis, Mosquitto) and one subscription on
// each, an event is published once, and each broker's own consumer gets
// the webhook body with signature headers that verify with the
// subscription's secret. A tenant token then cannot list connections or
// use one not granted to it, and a connection in use cannot be deleted.
func TestDestinationsBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	amqpURL := testbroker.URL(t, testbroker.AMQP)
	natsURL := testbroker.URL(t, testbroker.NATS)
	redisURL := testbroker.URL(t, testbroker.Redis)
	mqttURL := testbroker.URL(t, testbroker.MQTT)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	bin := heraldBinary(t)
	const token = "dest-e2e-token"
	addr := freeAddr(t)
	startNode(t, bin, addr, "--data-dir", t.TempDir(), "--dev", "--api-token", token, "--tiers", "0s,200ms,500ms", "--poll-interval", "50ms")
	call := func(tok, method, path string, body any) (int, map[string]any) {
		t.Helper()
		code, b, err := apiCall(ctx, addr, tok, method, path, body)
		require.NoError(t, err)
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return code, out
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	eventType := "e2e" + suffix + ".created"

	// The brokers' own consumers, ready before the event is published.
	got := map[string]chan brokerMsg{}

	// RabbitMQ: a queue bound to amq.topic for the event type.
	aconn, err := amqp.Dial(amqpURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = aconn.Close() })
	ach, err := aconn.Channel()
	require.NoError(t, err)
	q, err := ach.QueueDeclare("herald-e2e-"+suffix, false, true, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, ach.QueueBind(q.Name, eventType, "amq.topic", false, nil))
	adeliv, err := ach.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(t, err)
	got["amqp"] = make(chan brokerMsg, 4)
	go func() {
		for d := range adeliv {
			h := map[string]string{}
			for k, v := range d.Headers {
				h[k] = fmt.Sprint(v)
			}
			got["amqp"] <- brokerMsg{h, d.Body}
		}
	}()

	// NATS: a stream holding the subject.
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	subject := "herald.e2e." + suffix
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HERALD_E2E_" + suffix, Subjects: []string{subject}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), "HERALD_E2E_"+suffix) })

	// MQTT: a subscriber on the topic.
	mu, err := url.Parse(mqttURL)
	require.NoError(t, err)
	mqttTopic := "herald/e2e/" + suffix
	got["mqtt"] = make(chan brokerMsg, 4)
	mc := mqttSubscriber(ctx, t, mu.Host, mqttTopic, got["mqtt"])
	t.Cleanup(func() { _ = mc.Disconnect(&paho.Disconnect{ReasonCode: 0}) })

	redisStream := "herald-e2e-" + suffix
	ropt, err := redis.ParseURL(redisURL)
	require.NoError(t, err)
	rdb := redis.NewClient(ropt)
	t.Cleanup(func() { rdb.Del(context.Background(), redisStream); _ = rdb.Close() })

	// The admin's connections (granted to tenant acme only) and the
	// subscriptions, one per broker.
	for _, c := range []struct{ name, typ, url string }{
		{"rabbit", "amqp", amqpURL}, {"nats", "nats", natsURL}, {"redis", "redis", redisURL}, {"mqtt", "mqtt", mqttURL},
	} {
		code, out := call(token, "POST", "/v1/connections", map[string]any{"name": c.name, "type": c.typ, "url": c.url, "tenants": []string{"acme"}})
		require.Equal(t, http.StatusCreated, code, "%v", out)
	}
	secrets := map[string]string{}
	for typ, d := range map[string]map[string]any{
		"amqp":  {"type": "amqp", "connection": "rabbit", "exchange": "amq.topic"},
		"nats":  {"type": "nats", "connection": "nats", "subject": subject},
		"redis": {"type": "redis", "connection": "redis", "stream": redisStream, "maxlen": 1000},
		"mqtt":  {"type": "mqtt", "connection": "mqtt", "topic": mqttTopic},
	} {
		code, out := call(token, "POST", "/v1/subscriptions", map[string]any{"destination": d, "event_types": []string{eventType}, "tenant": "acme"})
		require.Equal(t, http.StatusCreated, code, "%s: %v", typ, out)
		require.Equal(t, typ, out["destination"].(map[string]any)["type"])
		secrets[typ] = out["secret"].(string)
	}

	code, ev := call(token, "POST", "/v1/events", map[string]any{"type": eventType, "tenant": "acme", "data": map[string]any{"n": 1}})
	require.Equal(t, http.StatusAccepted, code, "%v", ev)
	require.EqualValues(t, 4, ev["deliveries"])
	eventID := ev["id"].(string)

	verify := func(typ string, m brokerMsg) {
		t.Helper()
		require.Contains(t, string(m.body), eventID, typ)
		require.Equal(t, eventType, m.headers["herald-event-type"], typ)
		require.Equal(t, "acme", m.headers["herald-tenant"], typ)
		h := http.Header{}
		for k, v := range m.headers {
			h.Set(k, v)
		}
		require.NoError(t, webhook.Verify([]string{secrets[typ]}, h, m.body, time.Now(), 5*time.Minute), "%s: the signature verifies with the subscription's secret", typ)
	}
	for _, typ := range []string{"amqp", "mqtt"} {
		select {
		case m := <-got[typ]:
			verify(typ, m)
		case <-ctx.Done():
			t.Fatalf("%s: nothing arrived", typ)
		}
	}
	var nm jetstream.RawStreamMsg
	require.Eventually(t, func() bool {
		m, err := stream.GetMsg(ctx, 1)
		if err == nil {
			nm = *m
		}
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "nats: nothing stored on the stream")
	nh := map[string]string{}
	for k := range nm.Header {
		nh[k] = nm.Header.Get(k)
	}
	verify("nats", brokerMsg{nh, nm.Data})
	var entries []redis.XMessage
	require.Eventually(t, func() bool {
		entries, err = rdb.XRange(ctx, redisStream, "-", "+").Result()
		return err == nil && len(entries) == 1
	}, 30*time.Second, 50*time.Millisecond, "redis: no entry on the stream")
	rh := map[string]string{}
	for k, v := range entries[0].Values {
		rh[k] = fmt.Sprint(v)
	}
	verify("redis", brokerMsg{rh, []byte(rh["body"])})

	// A tenant token: no connection listing, no URL, no ungranted use.
	code, tok := call(token, "POST", "/v1/tokens", map[string]any{"name": "globex", "tenant": "globex", "scopes": []string{"subscriptions:read", "subscriptions:write"}})
	require.Equal(t, http.StatusCreated, code, "%v", tok)
	globex := tok["token"].(string)
	code, _ = call(globex, "GET", "/v1/connections", nil)
	require.Equal(t, http.StatusForbidden, code)
	code, out := call(globex, "POST", "/v1/subscriptions", map[string]any{"destination": map[string]any{"type": "redis", "connection": "redis", "stream": "x"}})
	require.Equal(t, http.StatusForbidden, code, "%v", out)

	// A connection in use is not deleted.
	code, out = call(token, "DELETE", "/v1/connections/redis", nil)
	require.Equal(t, http.StatusConflict, code, "%v", out)
}

// mqttSubscriber connects an MQTT 5 client that forwards what arrives on
// topic to out, with the user properties as headers.
func mqttSubscriber(ctx context.Context, t *testing.T, host, topic string, out chan<- brokerMsg) *paho.Client {
	t.Helper()
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", host)
	require.NoError(t, err)
	c := paho.NewClient(paho.ClientConfig{
		Conn: conn,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			h := map[string]string{}
			for _, p := range pr.Packet.Properties.User {
				h[p.Key] = p.Value
			}
			out <- brokerMsg{h, pr.Packet.Payload}
			return true, nil
		}},
	})
	_, err = c.Connect(ctx, &paho.Connect{ClientID: "herald-e2e-" + strconv.FormatInt(time.Now().UnixNano(), 36), KeepAlive: 30, CleanStart: true})
	require.NoError(t, err)
	_, err = c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}})
	require.NoError(t, err)
	return c
}
