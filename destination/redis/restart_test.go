package redisdest_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/destination/desttest"
	"github.com/heraldhq/herald/internal/testbroker"
)

// startRedis starts the machine's Redis as .ci/run does.
func startRedis(t *testing.T, port string) {
	cmd := exec.Command("redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "starting redis-server: %s", out)
}

// TestRedisRestartMidStream publishes a steady stream of events through a
// real engine on SQLite while Redis is shut down and started again: every
// event ends delivered and on the consumer; duplicates (Redis has no
// dedupe) are counted and logged.
//
// Not parallel: it stops the broker the other tests of this package use
// (they run after it).
func TestRedisRestartMidStream(t *testing.T) {
	h := newHarness(t)
	u, err := url.Parse(h.url)
	require.NoError(t, err)
	addr := u.Host
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	t.Cleanup(func() { // whatever happened, leave Redis running
		if testbroker.WaitUp(addr, 100*time.Millisecond) != nil {
			startRedis(t, port)
		}
		require.NoError(t, testbroker.WaitUp(addr, 30*time.Second), "redis is not back")
	})

	pub := h.Publisher(t)
	tiers := delivery.Tiers{0, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	rig := desttest.NewRig(t, herald.DestinationRedis, pub, tiers)
	d, c := h.Target(t)
	sub := rig.Subscribe(t, d, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	col := desttest.Collect(ctx, c)

	const batches, perBatch = 30, 10
	for b := range batches {
		evs := make([]desttest.Event, perBatch)
		for i := range evs {
			evs[i] = desttest.Event{Type: "redis.restart", Seq: b*perBatch + i}
		}
		rig.Publish(t, []*herald.Subscription{sub}, evs...)
		if b == batches/3 {
			// Redis here keeps nothing on disk, so entries the consumer
			// has not read when it stops die with it, whatever herald
			// does. Pause writes (herald's XADDs wait), let the consumer
			// read to the end of the stream, then shut down: the waiting
			// XADDs fail, as do those made while Redis is down, and the
			// test checks that herald retries each until it lands.
			require.NoError(t, h.rdb.Do(context.Background(), "CLIENT", "PAUSE", "5000", "WRITE").Err())
			length := h.rdb.XLen(context.Background(), d.Stream).Val()
			require.Eventually(t, func() bool { return int64(len(col.Received())) >= length }, 5*time.Second, time.Millisecond)
			out, err := exec.Command("redis-cli", "-p", port, "shutdown", "nosave").CombinedOutput()
			t.Logf("redis-cli shutdown nosave after %d entries: %v %s", length, err, out)
			require.Eventually(t, func() bool { return testbroker.WaitUp(addr, 0) != nil }, 10*time.Second, 10*time.Millisecond, "redis did not stop")
		}
		if b == 2*batches/3 {
			t.Log("starting redis-server (.ci/run's command)")
			startRedis(t, port)
			require.NoError(t, testbroker.WaitUp(addr, 30*time.Second))
		}
		time.Sleep(20 * time.Millisecond) // the stream's pace, not a wait for work
	}
	const n = batches * perBatch
	retried := rig.AllDelivered(t, sub.ID, n, 3*time.Minute)
	t.Logf("failed attempts during the outage, by class: %v", rig.FailedAttempts(t, sub.ID))
	msgs := col.AwaitDistinct(t, n, time.Minute)
	distinct, dups := desttest.Distinct(msgs)
	t.Logf("redis restart: %d events, %d entries read, %d distinct webhook-ids, %d duplicated ids %v (Redis has no dedupe), %d deliveries retried",
		n, len(msgs), distinct, len(dups), dups, retried)
	require.Equal(t, n, distinct, "every event delivered")
}
