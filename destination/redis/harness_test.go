package redisdest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/destination/desttest"
	redisdest "github.com/heraldhq/herald/destination/redis"
	"github.com/heraldhq/herald/internal/testbroker"
)

// connName is the connection every test destination names.
const connName = "redis-test"

// harness adapts Redis Streams to desttest: a fresh stream per Target, a
// string key for Broken (WRONGTYPE).
type harness struct {
	url   string
	conns *destination.Static
	rdb   *redis.Client
}

var _ desttest.Harness = (*harness)(nil)

func newHarness(t *testing.T) *harness {
	t.Helper()
	u := testbroker.URL(t, testbroker.Redis)
	opt, err := redis.ParseURL(u)
	require.NoError(t, err)
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	conns := destination.NewStatic(&herald.Connection{Name: connName, Type: herald.DestinationRedis, URL: u, AllTenants: true})
	return &harness{url: u, conns: conns, rdb: rdb}
}

func (h *harness) Type() herald.DestinationType { return herald.DestinationRedis }

func (h *harness) Publisher(t *testing.T) destination.Publisher {
	p := redisdest.New(redisdest.Config{Connections: h.conns})
	t.Cleanup(p.Close)
	return p
}

func (h *harness) Target(t *testing.T) (herald.Destination, desttest.Consumer) {
	stream := h.key(t, "stream")
	return herald.Destination{Type: herald.DestinationRedis, Connection: connName, Stream: stream},
		&consumer{rdb: h.rdb, stream: stream, last: "0"}
}

func (h *harness) Broken(t *testing.T) (herald.Destination, herald.ErrorClass, bool) {
	key := h.key(t, "string")
	require.NoError(t, h.rdb.Set(context.Background(), key, "not a stream", 0).Err())
	return herald.Destination{Type: herald.DestinationRedis, Connection: connName, Stream: key}, herald.ErrorBroker, true
}

// key returns a key unique to this test run, deleted at cleanup.
func (h *harness) key(t *testing.T, kind string) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	key := fmt.Sprintf("herald.test.%s.%s.%d", name, kind, time.Now().UnixNano())
	t.Cleanup(func() { _ = h.rdb.Del(context.Background(), key).Err() })
	return key
}

// consumer reads a stream from its start with XREAD; it keeps its place
// across errors (a restarted Redis gives later entries larger ids).
type consumer struct {
	rdb    *redis.Client
	stream string
	last   string
}

// Next implements desttest.Consumer.
func (c *consumer) Next(ctx context.Context) (*desttest.Received, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, err := c.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{c.stream, c.last}, Count: 1, Block: 200 * time.Millisecond}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// Redis restarting: try again until ctx ends.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for _, s := range res {
			for _, m := range s.Messages {
				c.last = m.ID
				return received(m), nil
			}
		}
	}
}

// received turns a stream entry into what the suite checks: body, and every
// other field as a header.
func received(m redis.XMessage) *desttest.Received {
	r := &desttest.Received{Headers: map[string]string{}}
	for k, v := range m.Values {
		s, _ := v.(string)
		if k == "body" {
			r.Body = []byte(s)
			continue
		}
		r.Headers[k] = s
	}
	return r
}

// TestConformance runs the conformance suite every destination type runs
// against its real server (desttest.Run) on Redis Streams.
func TestConformance(t *testing.T) {
	t.Parallel()
	desttest.Run(t, newHarness(t))
}
