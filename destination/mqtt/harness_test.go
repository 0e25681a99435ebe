package mqttdest_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/destination/desttest"
	mqttdest "github.com/heraldhq/herald/destination/mqtt"
	"github.com/heraldhq/herald/internal/testbroker"
)

// connName is the connection every test destination names.
const connName = "mqtt-test"

// harness adapts MQTT to desttest: a fresh topic with a QoS 1 subscriber
// per Target; Broken names a topic with a wildcard, refused before sending
// (invalid_request). (Mosquitto's own refusal, PUBACK 0x87 for a publish
// to $SYS, is out of reach: the API and the sender refuse "$" topics.)
type harness struct {
	url   string
	conns *destination.Static
}

var _ desttest.Harness = (*harness)(nil)

func newHarness(t *testing.T) *harness {
	t.Helper()
	u := testbroker.URL(t, testbroker.MQTT)
	conns := destination.NewStatic(&herald.Connection{Name: connName, Type: herald.DestinationMQTT, URL: u, AllTenants: true})
	return &harness{url: u, conns: conns}
}

func (h *harness) Type() herald.DestinationType { return herald.DestinationMQTT }

func (h *harness) Publisher(t *testing.T) destination.Publisher {
	p := mqttdest.New(mqttdest.Config{Connections: h.conns})
	t.Cleanup(p.Close)
	return p
}

func (h *harness) Target(t *testing.T) (herald.Destination, desttest.Consumer) {
	topic := h.topic(t)
	return herald.Destination{Type: herald.DestinationMQTT, Connection: connName, Topic: topic}, h.subscribe(t, topic)
}

func (h *harness) Broken(t *testing.T) (herald.Destination, herald.ErrorClass, bool) {
	return herald.Destination{Type: herald.DestinationMQTT, Connection: connName, Topic: "herald-test/+/wildcard"}, herald.ErrorInvalidRequest, true
}

// topic returns a topic unique to this test run.
func (h *harness) topic(t *testing.T) string {
	name := strings.NewReplacer("/", "_", "+", "_", "#", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("herald-test/%s/%d", name, time.Now().UnixNano())
}

// consumer is a QoS 1 subscriber to one topic. Its session outlives a
// broker restart (Mosquitto persists it at a clean exit) and the network
// connection, so what the broker took while it was away still arrives;
// it ends its session at cleanup.
//
// It connects with CleanStart false from the first connection (its
// client id is new, so there is no session to resume): Mosquitto 2.0
// saves only the sessions whose connection had CleanStart false, whatever
// their expiry. With CleanStart true the session was lost at the restart,
// and the events herald published before the consumer had subscribed
// again were dropped by the broker (a CI run lost 26 of 300 that way).
type consumer struct {
	cm   *autopaho.ConnectionManager
	msgs chan *paho.Publish
}

// subscribe connects a subscriber to topic and returns once the broker
// acknowledged the subscription.
func (h *harness) subscribe(t *testing.T, topic string) *consumer {
	t.Helper()
	u, err := url.Parse(h.url)
	require.NoError(t, err)
	c := &consumer{msgs: make(chan *paho.Publish, 10000)}
	subscribed := make(chan error, 1)
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		KeepAlive:                     30,
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         300,
		ReconnectBackoff:              autopaho.NewConstantBackoff(100 * time.Millisecond),
		ConnectTimeout:                5 * time.Second,
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}})
				select {
				case subscribed <- err:
				default:
				}
			}()
		},
		// End the session when the test ends.
		DisconnectPacketBuilder: func() *paho.Disconnect {
			zero := uint32(0)
			return &paho.Disconnect{Properties: &paho.DisconnectProperties{SessionExpiryInterval: &zero}}
		},
		ClientConfig: paho.ClientConfig{
			ClientID: fmt.Sprintf("herald-test-sub-%d", time.Now().UnixNano()),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				c.msgs <- pr.Packet
				return true, nil
			}},
		},
	}
	cm, err := autopaho.NewConnection(context.Background(), cfg)
	require.NoError(t, err)
	c.cm = cm
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = cm.Disconnect(ctx)
	})
	select {
	case err := <-subscribed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriber did not subscribe within 10s")
	}
	return c
}

// next waits for the next message as MQTT delivered it.
func (c *consumer) next(ctx context.Context) (*paho.Publish, error) {
	select {
	case m := <-c.msgs:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Next implements desttest.Consumer: the user properties are the headers.
func (c *consumer) Next(ctx context.Context) (*desttest.Received, error) {
	m, err := c.next(ctx)
	if err != nil {
		return nil, err
	}
	r := &desttest.Received{Headers: map[string]string{}, Body: m.Payload}
	if m.Properties != nil {
		for _, p := range m.Properties.User {
			r.Headers[p.Key] = p.Value
		}
	}
	return r, nil
}

// TestConformance runs the conformance suite every destination type runs
// against its real server (desttest.Run) on MQTT.
func TestConformance(t *testing.T) {
	t.Parallel()
	desttest.Run(t, newHarness(t))
}
