package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/heraldhq/herald/client"
)

// redisBroker is Redis Streams: herald-bench:<run>:events for herald,
// herald-bench:<run>:raw for the raw phase, both deleted afterwards.
type redisBroker struct {
	url               string
	stream, rawStream string
	rdb               *redis.Client
	reader            *redis.Client
	stop              context.CancelFunc
	done              chan struct{}
	eventType         string
}

func newRedisBroker(ctx context.Context, rawURL, run string, concurrency int) (*redisBroker, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bad --broker-url: %w", err)
	}
	opt.PoolSize = max(concurrency+4, opt.PoolSize)
	b := &redisBroker{
		url: rawURL, stream: "herald-bench:" + run + ":events", rawStream: "herald-bench:" + run + ":raw",
		rdb: redis.NewClient(opt), eventType: "bench." + run,
	}
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		b.rdb.Close()
		return nil, fmt.Errorf("error connecting to Redis: %w", err)
	}
	return b, nil
}

func (b *redisBroker) rawBody(body []byte) []byte { return body }

// rawWorker XADDs an entry with herald's fields (id, type, timestamp, the
// headers, body) on the shared pool and waits for the reply.
func (b *redisBroker) rawWorker(context.Context) (func(context.Context, []byte) error, func(), error) {
	publish := func(ctx context.Context, body []byte) error {
		h := rawHeaders(b.eventType, rawSeq.Add(1))
		names := make([]string, 0, len(h))
		for k := range h {
			names = append(names, k)
		}
		sort.Strings(names)
		vals := make([]any, 0, 8+2*len(h))
		vals = append(vals, "id", h["webhook-id"], "type", b.eventType, "timestamp", h["webhook-timestamp"])
		for _, k := range names {
			vals = append(vals, k, h[k])
		}
		vals = append(vals, "body", body)
		return b.rdb.XAdd(ctx, &redis.XAddArgs{Stream: b.rawStream, Values: vals}).Err()
	}
	return publish, func() {}, nil
}

// consume reads the stream with blocking XREAD from its start on a
// connection of its own.
func (b *redisBroker) consume(_ context.Context, a *arrivals) error {
	opt, err := redis.ParseURL(b.url)
	if err != nil {
		return err
	}
	opt.PoolSize = 1
	b.reader = redis.NewClient(opt)
	ctx, cancel := context.WithCancel(context.Background())
	b.stop, b.done = cancel, make(chan struct{})
	go func() {
		defer close(b.done)
		last := "0"
		for ctx.Err() == nil {
			res, err := b.reader.XRead(ctx, &redis.XReadArgs{Streams: []string{b.stream, last}, Count: 1000, Block: time.Second}).Result()
			now := time.Now()
			if err != nil {
				if !errors.Is(err, redis.Nil) && ctx.Err() == nil {
					time.Sleep(100 * time.Millisecond)
				}
				continue
			}
			for _, s := range res {
				for _, m := range s.Messages {
					last = m.ID
					id, _ := m.Values["webhook-id"].(string)
					if id == "" {
						id, _ = m.Values["id"].(string)
					}
					body, _ := m.Values["body"].(string)
					a.arrived(id, []byte(body), now)
				}
			}
		}
	}()
	return nil
}

func (b *redisBroker) connection(name string) *client.ConnectionInput {
	return connectionInput(name, "redis", b.url)
}

func (b *redisBroker) destination(conn string) client.Destination {
	return client.RedisDestination(conn, b.stream, 0)
}

func (b *redisBroker) close() {
	if b.stop != nil {
		b.stop()
		<-b.done
		b.reader.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.rdb.Del(ctx, b.stream, b.rawStream).Err()
	b.rdb.Close()
}
