package bench

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/heraldhq/herald/client"
)

// mqttSource is an MQTT 5 broker for --source. MQTT keeps nothing for a
// topic nobody subscribed to, so both throughput phases subscribe first
// and publish while consuming (live).
type mqttSource struct {
	*mqttBroker
	mu  sync.Mutex
	pub *paho.Client
}

func newMQTTSourceBroker(ctx context.Context, rawURL, run string) (*mqttSource, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "1883")
	}
	b := &mqttBroker{url: rawURL, addr: addr, run: run}
	c, err := b.dial(ctx, "herald-bench-src-probe-"+run, nil)
	if err != nil {
		return nil, err
	}
	_ = c.Disconnect(&paho.Disconnect{})
	return &mqttSource{mqttBroker: b}, nil
}

func (b *mqttSource) live() bool { return true }

func (b *mqttSource) place(_ context.Context, suffix string) (string, error) {
	return "herald-bench-src/" + b.run + "/" + suffix, nil
}

// client returns the shared publishing client.
func (b *mqttSource) client(ctx context.Context) (*paho.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pub == nil {
		c, err := b.dial(ctx, "herald-bench-src-pub-"+b.run, nil)
		if err != nil {
			return nil, err
		}
		b.pub = c
	}
	return b.pub, nil
}

// preload publishes at QoS 1 from 16 workers, each awaiting its PUBACK.
func (b *mqttSource) preload(ctx context.Context, topic string, n int64, body func(int64) []byte) error {
	c, err := b.client(ctx)
	if err != nil {
		return err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				r, err := c.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: body(i)})
				if err != nil {
					errc <- err
					return
				}
				if r.ReasonCode >= 0x80 {
					errc <- fmt.Errorf("%w: PUBACK reason %#x", errNacked, r.ReasonCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// rawConsume subscribes at QoS 1 with manual acknowledgements, acking
// every message as it arrives.
func (b *mqttSource) rawConsume(ctx context.Context, topic string, n int64, prefetch int, ready func()) error {
	var got atomic.Int64
	done := make(chan struct{})
	var c *paho.Client
	var once sync.Once
	c, err := b.dialManual(ctx, "herald-bench-src-raw-"+b.run, prefetch, func(pr paho.PublishReceived) (bool, error) {
		_ = pr.Client.Ack(pr.Packet)
		if got.Add(1) >= n {
			once.Do(func() { close(done) })
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	defer func() { _ = c.Disconnect(&paho.Disconnect{}) }()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		return err
	}
	ready()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d of %d consumed: %w", got.Load(), n, ctx.Err())
	}
}

// dialManual is dial with manual acknowledgements and a receive maximum.
func (b *mqttSource) dialManual(ctx context.Context, id string, recvMax int, onPublish func(paho.PublishReceived) (bool, error)) (*paho.Client, error) {
	conn, err := net.DialTimeout("tcp", b.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: conn, EnableManualAcknowledgment: true,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){onPublish}})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rm := uint16(min(recvMax, 65535))
	ca, err := c.Connect(ctx, &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true,
		Properties: &paho.ConnectProperties{ReceiveMaximum: &rm}})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	if ca.ReasonCode != 0 {
		_ = conn.Close()
		return nil, fmt.Errorf("MQTT broker refused the connection: reason %#x", ca.ReasonCode)
	}
	return c, nil
}

func (b *mqttSource) publisher(ctx context.Context, topic string) (func(context.Context, []byte) error, error) {
	c, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, body []byte) error {
		_, err := c.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: body})
		return err
	}, nil
}

func (b *mqttSource) sourceInput(name, conn, topic string) client.SourceInput {
	return client.SourceInput{Name: name, Type: "mqtt", Connection: conn, Topic: topic}
}

func (b *mqttSource) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pub != nil {
		_ = b.pub.Disconnect(&paho.Disconnect{})
	}
}
