package bench

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/heraldhq/herald/client"
)

// mqttBroker is an MQTT 5 broker (Mosquitto): herald publishes to
// herald-bench/<run>/events, the raw phase to herald-bench/<run>/raw, both
// at QoS 1.
type mqttBroker struct {
	url, addr       string
	run             string
	topic, rawTopic string
	eventType       string

	mu      sync.Mutex
	raw     *paho.Client // shared by the raw workers, as herald shares one connection
	rawRefs int
	sub     *paho.Client
}

func newMQTTBroker(ctx context.Context, rawURL, run string) (*mqttBroker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "1883")
	}
	b := &mqttBroker{url: rawURL, addr: addr, run: run,
		topic: "herald-bench/" + run + "/events", rawTopic: "herald-bench/" + run + "/raw", eventType: "bench." + run}
	// Fail early when nothing answers.
	c, err := b.dial(ctx, "herald-bench-probe-"+run, nil)
	if err != nil {
		return nil, err
	}
	_ = c.Disconnect(&paho.Disconnect{})
	return b, nil
}

// dial connects an MQTT 5 client with a clean session.
func (b *mqttBroker) dial(ctx context.Context, id string, onPublish func(paho.PublishReceived) (bool, error)) (*paho.Client, error) {
	conn, err := net.DialTimeout("tcp", b.addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("error connecting to the MQTT broker: %w", err)
	}
	cfg := paho.ClientConfig{ClientID: id, Conn: conn}
	if onPublish != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){onPublish}
	}
	c := paho.NewClient(cfg)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true})
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("error connecting to the MQTT broker: %w", err)
	}
	if ca.ReasonCode != 0 {
		_ = conn.Close()
		return nil, fmt.Errorf("MQTT broker refused the connection: reason %#x", ca.ReasonCode)
	}
	return c, nil
}

func (b *mqttBroker) rawBody(body []byte) []byte { return body }

// rawWorker publishes at QoS 1 on the shared client and waits for the
// PUBACK (the broker's receive maximum bounds the messages in flight, as
// for herald).
func (b *mqttBroker) rawWorker(ctx context.Context) (func(context.Context, []byte) error, func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.raw == nil {
		c, err := b.dial(ctx, "herald-bench-raw-"+b.run, nil)
		if err != nil {
			return nil, nil, err
		}
		b.raw = c
	}
	b.rawRefs++
	c := b.raw
	publish := func(ctx context.Context, body []byte) error {
		h := rawHeaders(b.eventType, rawSeq.Add(1))
		props := &paho.PublishProperties{ContentType: "application/json"}
		for k, v := range h {
			props.User.Add(k, v)
		}
		r, err := c.Publish(ctx, &paho.Publish{QoS: 1, Topic: b.rawTopic, Payload: body, Properties: props})
		if err != nil {
			return err
		}
		if r.ReasonCode >= 0x80 {
			return fmt.Errorf("%w: PUBACK reason %#x", errNacked, r.ReasonCode)
		}
		return nil
	}
	release := func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.rawRefs--; b.rawRefs == 0 {
			_ = b.raw.Disconnect(&paho.Disconnect{})
			b.raw = nil
		}
	}
	return publish, release, nil
}

func (b *mqttBroker) consume(ctx context.Context, a *arrivals) error {
	c, err := b.dial(ctx, "herald-bench-sub-"+b.run, func(pr paho.PublishReceived) (bool, error) {
		var id string
		if p := pr.Packet.Properties; p != nil {
			id = p.User.Get("webhook-id")
		}
		a.arrived(id, pr.Packet.Payload, time.Now())
		return true, nil
	})
	if err != nil {
		return err
	}
	b.sub = c
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: b.topic, QoS: 1}}}); err != nil {
		return fmt.Errorf("error subscribing to %s: %w", b.topic, err)
	}
	return nil
}

func (b *mqttBroker) connection(name string) *client.ConnectionInput {
	return connectionInput(name, "mqtt", b.url)
}

func (b *mqttBroker) destination(conn string) client.Destination {
	return client.MQTTDestination(conn, b.topic, false)
}

func (b *mqttBroker) close() {
	if b.sub != nil {
		_ = b.sub.Disconnect(&paho.Disconnect{})
	}
}
