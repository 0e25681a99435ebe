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

	mqttdest "github.com/heraldhq/herald/destination/mqtt"
	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/internal/testengine"
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

// TestMosquittoRestartMidStream drives a real engine on SQLite while
// Mosquitto is stopped (SIGTERM) and started again mid-stream: every event
// ends delivered and on the consumer; duplicates (MQTT has no dedupe) are
// counted and logged.
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

	pub := mqttdest.New(mqttdest.Config{Connections: h.conns})
	d, c := h.Target(t)
	eng := testengine.Start(t, pub, d)

	counter := testengine.NewCounter()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for {
			m, err := c.Next(ctx)
			if err != nil {
				return
			}
			if _, err := counter.Add(m.Body); err != nil {
				t.Error(err)
			}
		}
	}()

	const n = 300
	wait := eng.PublishAll("mqtt.restart", n, 3*time.Millisecond)
	require.Eventually(t, func() bool { return counter.Distinct() >= n/4 }, 30*time.Second, 5*time.Millisecond)

	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	require.Eventually(t, func() bool { return testbroker.WaitUp(addr, 0) != nil }, 10*time.Second, 10*time.Millisecond, "mosquitto did not stop")
	// The pid file goes when Mosquitto has finished exiting (and written
	// its database); starting before that would find the port taken.
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 10*time.Second, 10*time.Millisecond, "mosquitto did not exit")
	t.Logf("mosquitto stopped after %d events received", counter.Total())
	startMosquitto(t)
	require.NoError(t, testbroker.WaitUp(addr, 30*time.Second))

	ids, err := wait()
	require.NoError(t, err)
	require.Len(t, ids, n)
	eng.CheckAllDelivered(t, ids, counter, 90*time.Second)
}
