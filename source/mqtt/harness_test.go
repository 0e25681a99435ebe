package mqttsrc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/source"
	mqttsrc "github.com/heraldhq/herald/source/mqtt"
	"github.com/heraldhq/herald/source/sourcetest"
)

// The machine's Mosquitto: its configuration and pid file (see .ci/run).
const (
	mosquittoConf = "/etc/mosquitto/mosquitto.conf"
	mosquittoPID  = "/run/mosquitto/mosquitto.pid"
)

// suiteNodes are the node names sourcetest's cases run ("n1" first).
var suiteNodes = []string{"n1", "n2"}

// harness adapts Mosquitto to sourcetest: a fresh topic per source.
//
// MQTT keeps nothing for a topic nobody subscribed to (the PUBACK says
// 0x10, no matching subscribers), and the suite publishes some messages
// before it starts a node. So the first Publish to a source no consumer
// has subscribed yet first opens and closes the consumer the suite's first
// node ("n1") will open: its session, subscribed, then holds the messages
// until that node connects, as it would for a herald node that consumed
// the source before and is down. Sources are named by the harness, so
// their client ids are known; their sessions are ended at cleanup.
type harness struct {
	url string

	mu         sync.Mutex
	subscribed map[string]bool // source names a consumer subscribed for
}

var (
	_ sourcetest.Harness   = (*harness)(nil)
	_ sourcetest.Restarter = (*harness)(nil)
	_ sourcetest.Backlog   = (*harness)(nil)
)

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{url: testbroker.URL(t, testbroker.MQTT), subscribed: map[string]bool{}}
}

func (h *harness) Type() herald.DestinationType { return herald.DestinationMQTT }
func (h *harness) URL() string                  { return h.url }

// Dial is mqttsrc.Dial noting which sources got subscribed.
func (h *harness) Dial(ctx context.Context, p source.DialParams) (source.Consumer, error) {
	c, err := mqttsrc.Dial(ctx, p)
	if err == nil {
		h.mu.Lock()
		h.subscribed[p.Source.Name] = true
		h.mu.Unlock()
	}
	return c, err
}

func (h *harness) conn() *herald.Connection {
	return &herald.Connection{Name: "broker", Type: herald.DestinationMQTT, URL: h.url, AllTenants: true}
}

// NewSource names a source and its own topic; its sessions (ordered or
// not, every suite node) end at cleanup.
func (h *harness) NewSource(t *testing.T) *herald.Source {
	n := rand.Int64()
	src := &herald.Source{Type: herald.DestinationMQTT, Name: fmt.Sprintf("mqtt-%d", n),
		Topic: fmt.Sprintf("herald-src-test/%d/events", n)}
	t.Cleanup(func() {
		for _, ordered := range []bool{false, true} {
			s := *src
			s.Ordered = ordered
			for _, node := range suiteNodes {
				endSession(t, h.url, mqttsrc.ClientID(node, &s))
			}
		}
	})
	return src
}

// Publish sends msgs at QoS 1, one at a time, each awaiting its PUBACK
// (sent again while the PUBACK says nobody is subscribed): headers as
// user properties, ID as correlation data.
func (h *harness) Publish(t *testing.T, src *herald.Source, msgs []sourcetest.Msg) {
	t.Helper()
	h.mu.Lock()
	done := h.subscribed[src.Name]
	h.mu.Unlock()
	if !done {
		// A node that started just before may be connecting with the same
		// client id: one takes the session over from the other, and this
		// dial may fail for it. Either way the session gets subscribed,
		// and publish waits for that.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := h.Dial(ctx, source.DialParams{Source: src, Connection: h.conn(), Node: suiteNodes[0], Prefetch: src.PrefetchOrDefault()})
		cancel()
		if err != nil {
			t.Logf("subscribing %s's first session beforehand: %v", src.Name, err)
		} else {
			require.NoError(t, c.Close())
		}
	}
	p := newPublisher(t, h.url)
	for _, m := range msgs {
		p.publish(t, src.Topic, m)
	}
}

// Backlog keeps what the restart case publishes while no node may be
// connected within Mosquitto's max_queued_messages (1000 by default, per
// session, beyond the messages in flight): the broker drops the rest.
func (h *harness) Backlog() int { return 400 }

// Restart stops Mosquitto (SIGTERM: it saves its sessions and their
// messages, persistence being on in its configuration), runs down, then
// starts it with .ci/run's command and waits until it accepts clients.
//
// Mosquitto 2.0.11 does not save shared subscriptions (persist_write.c
// saves a topic's plain subscribers only): the sessions come back without
// them, and until herald's consumer reconnects and subscribes again a
// publish reaches nobody (PUBACK 0x10). Publish sends such a message
// again, as a publisher that needs a subscriber would: it was never
// herald's to lose. What the sessions held at the stop comes back with
// them.
func (h *harness) Restart(t *testing.T, down func()) {
	restartMosquitto(t, h.url, down)
}

func restartMosquitto(t *testing.T, rawURL string, down func()) {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	addr := u.Host
	pidText, err := os.ReadFile(mosquittoPID)
	require.NoError(t, err, "the machine's Mosquitto is not running from %s: this test restarts it", mosquittoConf)
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	require.NoError(t, err)
	start := func() {
		out, err := exec.Command("mosquitto", "-d", "-c", mosquittoConf).CombinedOutput()
		require.NoError(t, err, "starting mosquitto: %s", out)
	}
	t.Cleanup(func() { // whatever happened, leave Mosquitto running
		if testbroker.WaitUp(addr, 100*time.Millisecond) != nil {
			start()
		}
		require.NoError(t, testbroker.WaitUp(addr, 30*time.Second), "mosquitto is not back")
	})
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	// Gone once it has written its database and exited; starting before
	// that would find the port taken.
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 20*time.Second, 10*time.Millisecond, "mosquitto did not exit")
	down()
	start()
	require.NoError(t, testbroker.WaitUp(addr, 30*time.Second))
}

// publisher is a plain QoS 1 publisher.
type publisher struct{ cm *autopaho.ConnectionManager }

func newPublisher(t *testing.T, rawURL string) *publisher {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	cm, err := autopaho.NewConnection(context.Background(), autopaho.ClientConfig{
		ServerUrls: []*url.URL{u}, KeepAlive: 30, CleanStartOnInitialConnection: true,
		ReconnectBackoff: autopaho.NewConstantBackoff(100 * time.Millisecond),
		ClientConfig:     paho.ClientConfig{ClientID: fmt.Sprintf("herald-src-test-pub-%d", rand.Int64())},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = cm.Disconnect(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cm.AwaitConnection(ctx))
	return &publisher{cm: cm}
}

func (p *publisher) publish(t *testing.T, topic string, m sourcetest.Msg) {
	t.Helper()
	require.NoError(t, p.send(topic, m))
}

// send publishes m and waits for its PUBACK, sending it again while the
// PUBACK says nobody is subscribed (up to 30 s).
func (p *publisher) send(topic string, m sourcetest.Msg) error {
	props := &paho.PublishProperties{}
	for k, v := range m.Headers {
		props.User.Add(k, v)
	}
	if m.ID != "" {
		props.CorrelationData = []byte(m.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		res, err := p.cm.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: m.Body, Properties: props})
		switch {
		case err != nil:
			return err
		case res.ReasonCode == 0:
			return nil
		case res.ReasonCode != noMatchingSubscribers:
			return fmt.Errorf("PUBACK reason 0x%02x", res.ReasonCode)
		}
		// Nobody subscribed, so the broker dropped it: a message that is
		// not there yet. It happens after a restart of Mosquitto 2.0.11,
		// which keeps sessions but not their shared subscriptions, until
		// the consumer has subscribed again.
		select {
		case <-ctx.Done():
			return fmt.Errorf("no subscriber for %s within 30s (PUBACK 0x10)", topic)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// noMatchingSubscribers is the PUBACK reason of a message nobody
// subscribed to (MQTT 5: 0x10, a success: the broker took it and dropped
// it).
const noMatchingSubscribers = 0x10

// endSession ends the broker session of clientID: a clean start with no
// session expiry, then a disconnect.
func endSession(t *testing.T, rawURL, clientID string) {
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	cm, err := autopaho.NewConnection(context.Background(), autopaho.ClientConfig{
		ServerUrls: []*url.URL{u}, KeepAlive: 30, CleanStartOnInitialConnection: true,
		ClientConfig: paho.ClientConfig{ClientID: clientID},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cm.AwaitConnection(ctx) == nil {
		_ = cm.Disconnect(ctx)
	}
}
