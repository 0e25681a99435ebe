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

	redisdest "github.com/heraldhq/herald/destination/redis"
	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/internal/testengine"
)

// startRedis starts the machine's Redis as .ci/run does.
func startRedis(t *testing.T, port string) {
	cmd := exec.Command("redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "starting redis-server: %s", out)
}

// TestRedisRestartMidStream drives a real engine on SQLite while Redis is
// shut down and started again mid-stream: every event ends delivered and
// on the consumer; duplicates (Redis has no dedupe) are counted and logged.
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

	pub := redisdest.New(redisdest.Config{Connections: h.conns})
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
	wait := eng.PublishAll("redis.restart", n, 3*time.Millisecond)
	require.Eventually(t, func() bool { return counter.Distinct() >= n/4 }, 30*time.Second, 5*time.Millisecond)

	// Redis here keeps nothing on disk, so entries the consumer has not read
	// when it stops die with it, whatever herald does. Pause writes (herald's
	// XADDs wait), let the consumer read to the end of the stream, then shut
	// down: the XADDs waiting then fail, as do those made while Redis is
	// down, and the test checks that herald retries every one until it lands.
	admin := h.rdb
	require.NoError(t, admin.Do(context.Background(), "CLIENT", "PAUSE", "5000", "WRITE").Err())
	length := admin.XLen(context.Background(), d.Stream).Val()
	require.Eventually(t, func() bool { return int64(counter.Total()) >= length }, 5*time.Second, time.Millisecond)
	out, err := exec.Command("redis-cli", "-p", port, "shutdown", "nosave").CombinedOutput()
	t.Logf("redis-cli shutdown nosave after %d entries: %v %s", length, err, out)
	require.Eventually(t, func() bool { return testbroker.WaitUp(addr, 0) != nil }, 10*time.Second, 10*time.Millisecond, "redis did not stop")
	startRedis(t, port)
	require.NoError(t, testbroker.WaitUp(addr, 30*time.Second))

	ids, err := wait()
	require.NoError(t, err)
	require.Len(t, ids, n)
	eng.CheckAllDelivered(t, ids, counter, 90*time.Second)
}
