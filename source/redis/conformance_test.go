package redissrc_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/internal/testbroker"
	redissrc "github.com/heraldhq/herald/source/redis"
	"github.com/heraldhq/herald/source/sourcetest"
)

// TestConformance runs the sources suite against the machine's Redis.
// Its BrokerRestart case restarts that Redis (see harness.Restart).
func TestConformance(t *testing.T) {
	e := newEnv(t)
	h := &harness{url: e.url, rdb: e.rdb, groups: map[string]string{}}
	sourcetest.Run(t, h, redissrc.Dial, httpapi.DecodeEvent)
}

// harness adapts Redis Streams to sourcetest: a fresh stream per source;
// rejects are counted in <stream>:rejected.
type harness struct {
	url string
	rdb *redis.Client

	mu sync.Mutex
	// groups are the live sources' streams and their group names, which
	// Restart waits on.
	groups map[string]string
}

var (
	_ sourcetest.Harness     = (*harness)(nil)
	_ sourcetest.Restarter   = (*harness)(nil)
	_ sourcetest.DeadLetters = (*harness)(nil)
)

func (h *harness) Type() herald.DestinationType { return herald.DestinationRedis }
func (h *harness) URL() string                  { return h.url }

func (h *harness) NewSource(t *testing.T) *herald.Source {
	stream := uniqueStream(t)
	h.mu.Lock()
	h.groups[stream] = herald.DefaultSourceConsumer
	h.mu.Unlock()
	t.Cleanup(func() {
		h.mu.Lock()
		delete(h.groups, stream)
		h.mu.Unlock()
		_ = h.rdb.Del(context.Background(), stream, stream+":rejected").Err()
	})
	return &herald.Source{Type: herald.DestinationRedis, Stream: stream}
}

// Publish appends one entry per message: its headers (sorted) then body.
// Msg.ID has no Redis counterpart (Redis assigns entry ids).
func (h *harness) Publish(t *testing.T, src *herald.Source, msgs []sourcetest.Msg) {
	t.Helper()
	pipe := h.rdb.Pipeline()
	for _, m := range msgs {
		names := make([]string, 0, len(m.Headers))
		for k := range m.Headers {
			names = append(names, k)
		}
		sort.Strings(names)
		fields := make([]any, 0, 2+2*len(names))
		for _, k := range names {
			fields = append(fields, k, m.Headers[k])
		}
		fields = append(fields, "body", string(m.Body))
		pipe.XAdd(context.Background(), &redis.XAddArgs{Stream: src.Stream, Values: fields})
	}
	cmds, err := pipe.Exec(context.Background())
	require.NoError(t, err)
	require.Len(t, cmds, len(msgs))
}

func (h *harness) DeadLetters(t *testing.T, src *herald.Source) int {
	t.Helper()
	n, err := h.rdb.XLen(context.Background(), src.Stream+":rejected").Result()
	require.NoError(t, err)
	return int(n)
}

// Restart shuts the machine's Redis down and starts it again with the
// flags it ran with (.ci/run's: no RDB snapshots, no AOF; its dir,
// logfile and bind read from the running server).
//
// That Redis keeps nothing on disk, so a restart loses every stream, group
// and pending list: entries not yet consumed would die with the server
// whatever herald does. Restart therefore first waits until every live
// source's group has consumed and acknowledged its whole stream; the case
// then checks what a restart can test here: the consumer notices the
// dropped connection, dials until Redis is back, recreates its group on
// the new empty stream and consumes what is published afterwards.
func (h *harness) Restart(t *testing.T, down func()) {
	t.Helper()
	u, err := url.Parse(h.url)
	require.NoError(t, err)
	addr := u.Host
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	ctx := context.Background()
	conf := map[string]string{}
	for _, k := range []string{"dir", "logfile", "bind"} {
		v, err := h.rdb.ConfigGet(ctx, k).Result()
		require.NoError(t, err)
		conf[k] = v[k]
	}
	start := func() {
		args := []string{"--daemonize", "yes", "--port", port, "--save", "", "--appendonly", "no"}
		if b := strings.Fields(conf["bind"]); len(b) > 0 {
			args = append(append(args, "--bind"), b...)
		}
		if conf["dir"] != "" {
			args = append(args, "--dir", conf["dir"])
		}
		if conf["logfile"] != "" {
			args = append(args, "--logfile", conf["logfile"])
		}
		out, err := exec.Command("redis-server", args...).CombinedOutput()
		require.NoError(t, err, "starting redis-server: %s", out)
	}
	t.Cleanup(func() { // whatever happened, leave Redis running
		if testbroker.WaitUp(addr, 100*time.Millisecond) != nil {
			start()
		}
		require.NoError(t, testbroker.WaitUp(addr, 30*time.Second), "redis is not back")
	})

	h.waitConsumed(t)
	out, err := exec.Command("redis-cli", "-h", u.Hostname(), "-p", port, "shutdown", "nosave").CombinedOutput()
	t.Logf("redis-cli shutdown nosave: %v %s", err, out)
	require.Eventually(t, func() bool { return testbroker.WaitUp(addr, 0) != nil }, 10*time.Second, 10*time.Millisecond,
		"redis did not stop")
	down()
	start()
	require.Eventually(t, func() bool { return h.rdb.Ping(ctx).Err() == nil }, 30*time.Second, 50*time.Millisecond,
		"redis did not come back")
}

// waitConsumed waits until every live source's group has read its whole
// stream and acknowledged all of it.
func (h *harness) waitConsumed(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	groups := make(map[string]string, len(h.groups))
	for s, g := range h.groups {
		groups[s] = g
	}
	h.mu.Unlock()
	require.Eventually(t, func() bool {
		for stream, group := range groups {
			infos, err := h.rdb.XInfoGroups(context.Background(), stream).Result()
			if err != nil {
				var rerr redis.Error
				if errors.As(err, &rerr) && strings.Contains(err.Error(), "no such key") {
					continue // never published to
				}
				return false
			}
			done := false
			for _, g := range infos {
				done = done || (g.Name == group && g.Lag == 0 && g.Pending == 0)
			}
			if !done {
				return false
			}
		}
		return true
	}, 120*time.Second, 50*time.Millisecond, "the sources did not consume their streams before the restart")
}
