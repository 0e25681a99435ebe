package mqttdest_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/destination/desttest"
	"github.com/heraldhq/herald/internal/testbroker"
)

// The machine's Mosquitto: its configuration and pid file (see .ci/run).
const (
	mosquittoConf = "/etc/mosquitto/mosquitto.conf"
	mosquittoPID  = "/run/mosquitto/mosquitto.pid"
)

// startMosquitto starts the machine's Mosquitto as .ci/run does.
func startMosquitto(t *testing.T) {
	out, err := exec.Command("mosquitto", "-d", "-c", mosquittoConf).CombinedOutput()
	require.NoError(t, err, "starting mosquitto: %s", out)
}

// TestMosquittoRestartMidStream publishes a steady stream of events
// through a real engine on SQLite while Mosquitto is stopped (SIGTERM) and
// started again: every event ends delivered and on the consumer;
// duplicates (MQTT has no dedupe) are counted and logged.
//
// The consumer keeps a session (expiry 300 s), which Mosquitto saves at
// exit (persistence true) with the messages it holds for it: what it
// acknowledged to herald but had not yet passed on is not lost.
//
// Not parallel: it stops the broker the other tests of this package use
// (they run after it).
func TestMosquittoRestartMidStream(t *testing.T) {
	h := newHarness(t)
	u, err := url.Parse(h.url)
	require.NoError(t, err)
	addr := u.Host
	pidText, err := os.ReadFile(mosquittoPID)
	if err != nil {
		t.Skipf("SKIP: the machine's Mosquitto is not running from %s (%v): this test restarts it", mosquittoConf, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	require.NoError(t, err)
	t.Cleanup(func() { // whatever happened, leave Mosquitto running
		if testbroker.WaitUp(addr, 100*time.Millisecond) != nil {
			startMosquitto(t)
		}
		require.NoError(t, testbroker.WaitUp(addr, 30*time.Second), "mosquitto is not back")
	})

	pub := h.Publisher(t)
	tiers := delivery.Tiers{0, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	rig := desttest.NewRig(t, herald.DestinationMQTT, pub, tiers)
	d, c := h.Target(t)
	sub := rig.Subscribe(t, d, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	col := desttest.Collect(ctx, c)

	const batches, perBatch = 30, 10
	for b := range batches {
		evs := make([]desttest.Event, perBatch)
		for i := range evs {
			evs[i] = desttest.Event{Type: "mqtt.restart", Seq: b*perBatch + i}
		}
		rig.Publish(t, []*herald.Subscription{sub}, evs...)
		if b == batches/3 {
			t.Logf("stopping mosquitto (SIGTERM) after %d messages received", len(col.Received()))
			require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
			require.Eventually(t, func() bool { return testbroker.WaitUp(addr, 0) != nil }, 10*time.Second, 10*time.Millisecond, "mosquitto did not stop")
			// Gone once it has written its database and exited; starting
			// before that would find the port taken.
			require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 10*time.Second, 10*time.Millisecond, "mosquitto did not exit")
		}
		if b == 2*batches/3 {
			t.Log("starting mosquitto (.ci/run's command)")
			startMosquitto(t)
			require.NoError(t, testbroker.WaitUp(addr, 30*time.Second))
		}
		time.Sleep(20 * time.Millisecond) // the stream's pace, not a wait for work
	}
	const n = batches * perBatch
	retried := rig.AllDelivered(t, sub.ID, n, 3*time.Minute)
	t.Logf("failed attempts during the outage, by class: %v", rig.FailedAttempts(t, sub.ID))
	msgs := col.AwaitDistinct(t, n, time.Minute)
	distinct, dups := desttest.Distinct(msgs)
	t.Logf("mosquitto restart: %d events, %d messages received, %d distinct webhook-ids, %d duplicated ids %v (MQTT has no dedupe), %d deliveries retried",
		n, len(msgs), distinct, len(dups), dups, retried)
	require.Equal(t, n, distinct, "every event delivered")
}
