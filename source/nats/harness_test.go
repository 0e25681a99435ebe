package natssrc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/source/sourcetest"
)

// harness adapts the machine's NATS server to sourcetest (Harness and
// Restarter; JetStream keeps no dead letters).
type harness struct {
	url string
}

var (
	_ sourcetest.Harness   = (*harness)(nil)
	_ sourcetest.Restarter = (*harness)(nil)
)

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{url: testbroker.URL(t, testbroker.NATS)}
}

func (h *harness) Type() herald.DestinationType { return herald.DestinationNATS }

func (h *harness) URL() string { return h.url }

// js opens a JetStream context on a connection of its own, closed on
// cleanup.
func (h *harness) js(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(h.url, nats.Timeout(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// NewSource creates a stream of its own (subjects <name>.>), deleted on
// cleanup.
func (h *harness) NewSource(t *testing.T) *herald.Source {
	t.Helper()
	name := fmt.Sprintf("herald_src_%d", rand.Int64())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := h.js(t).CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
		Storage: jetstream.FileStorage})
	require.NoError(t, err)
	t.Cleanup(func() {
		// A connection of its own: the test's may be gone with a restart.
		nc, err := nats.Connect(h.url, nats.Timeout(5*time.Second))
		if err != nil {
			t.Logf("deleting stream %s: %v", name, err)
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = js.DeleteStream(ctx, name)
		}
		if err != nil {
			t.Logf("deleting stream %s: %v", name, err)
		}
	})
	return &herald.Source{Type: herald.DestinationNATS, Stream: name}
}

// subject is where Publish puts src's messages.
func subject(src *herald.Source) string { return src.Stream + ".order.created" }

// Publish publishes msgs one by one, each awaiting its PubAck; a failed
// publish is retried (a server just restarted may not serve JetStream
// yet), with the same Nats-Msg-Id when the message has one.
func (h *harness) Publish(t *testing.T, src *herald.Source, msgs []sourcetest.Msg) {
	t.Helper()
	h.publishTo(t, subject(src), msgs)
}

func (h *harness) publishTo(t *testing.T, subj string, msgs []sourcetest.Msg) {
	t.Helper()
	js := h.js(t)
	for i, m := range msgs {
		nm := nats.NewMsg(subj)
		nm.Data = m.Body
		for k, v := range m.Headers {
			nm.Header.Set(k, v)
		}
		var opts []jetstream.PublishOpt
		if m.ID != "" {
			opts = append(opts, jetstream.WithMsgID(m.ID))
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := js.PublishMsg(ctx, nm, opts...)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("publishing message %d of %d: %v", i, len(msgs), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// natsAddr is the host:port of the harness URL.
func (h *harness) natsAddr(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(h.url)
	require.NoError(t, err)
	port := u.Port()
	if port == "" {
		port = "4222"
	}
	return u.Hostname() + ":" + port
}

// stopNATS stops the machine's nats-server and waits until it is gone.
func (h *harness) stopNATS(t *testing.T) {
	t.Helper()
	out, err := exec.Command("start-stop-daemon", "--stop", "--oknodo", "--retry", "TERM/20/KILL/5",
		"--exec", "/usr/sbin/nats-server").CombinedOutput()
	require.NoError(t, err, "stopping nats-server: %s", out)
	addr := h.natsAddr(t)
	require.Eventually(t, func() bool { return testbroker.WaitUp(addr, 0) != nil }, 30*time.Second,
		20*time.Millisecond, "nats-server did not stop")
}

// startNATS starts nats-server as .ci/run does and waits until JetStream
// answers.
func (h *harness) startNATS(t *testing.T) {
	t.Helper()
	out, err := exec.Command("start-stop-daemon", "--start", "--oknodo", "--background",
		"--exec", "/usr/sbin/nats-server", "--",
		"-a", "127.0.0.1", "-p", "4222", "-js", "-sd", "/var/lib/nats-server",
		"-l", "/var/log/nats-server.log").CombinedOutput()
	require.NoError(t, err, "starting nats-server: %s", out)
	require.NoError(t, h.waitJetStream(60*time.Second), "nats-server is not back")
}

// waitJetStream waits until the server accepts a client and answers a
// JetStream request.
func (h *harness) waitJetStream(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := func() error {
			nc, err := nats.Connect(h.url, nats.Timeout(time.Second))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
			return err
		}()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ensureNATS leaves nats-server running whatever the test did.
func (h *harness) ensureNATS(t *testing.T) {
	t.Cleanup(func() {
		if testbroker.WaitUp(h.natsAddr(t), 100*time.Millisecond) != nil {
			h.startNATS(t)
		}
		require.NoError(t, h.waitJetStream(60*time.Second), "nats-server is not back")
	})
}

// Restart implements sourcetest.Restarter.
func (h *harness) Restart(t *testing.T, down func()) {
	t.Helper()
	h.ensureNATS(t)
	h.stopNATS(t)
	down()
	h.startNATS(t)
}
