package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/heraldhq/herald/client"
)

// redisSource is Redis Streams for --source: a stream per place, deleted
// afterwards with its :rejected companion.
type redisSource struct {
	run     string
	rdb     *redis.Client
	mu      sync.Mutex
	streams []string
}

func newRedisSourceBroker(ctx context.Context, rawURL, run string) (*redisSource, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bad --broker-url: %w", err)
	}
	b := &redisSource{run: run, rdb: redis.NewClient(opt)}
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		b.rdb.Close()
		return nil, fmt.Errorf("error connecting to Redis: %w", err)
	}
	return b, nil
}

func (b *redisSource) live() bool { return false }

func (b *redisSource) place(_ context.Context, suffix string) (string, error) {
	s := "herald-bench-src:" + b.run + ":" + suffix
	b.mu.Lock()
	b.streams = append(b.streams, s, s+":rejected")
	b.mu.Unlock()
	return s, nil
}

// preload XADDs in pipelines of 500.
func (b *redisSource) preload(ctx context.Context, stream string, n int64, body func(int64) []byte) error {
	const chunk = 500
	for i := int64(0); i < n; i += chunk {
		pipe := b.rdb.Pipeline()
		for j := i; j < min(i+chunk, n); j++ {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"body", body(j)}})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// rawConsume reads with XREADGROUP COUNT prefetch and XACKs each batch.
func (b *redisSource) rawConsume(ctx context.Context, stream string, n int64, prefetch int, ready func()) error {
	if err := b.rdb.XGroupCreateMkStream(ctx, stream, "raw", "0").Err(); err != nil && !isBusyGroup(err) {
		return err
	}
	ready()
	var got int64
	for got < n {
		res, err := b.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "raw", Consumer: "bench",
			Streams: []string{stream, ">"}, Count: int64(prefetch), Block: time.Second}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%d of %d consumed: %w", got, n, err)
		}
		for _, s := range res {
			ids := make([]string, len(s.Messages))
			for i, m := range s.Messages {
				ids[i] = m.ID
			}
			if len(ids) > 0 {
				if err := b.rdb.XAck(ctx, stream, "raw", ids...).Err(); err != nil {
					return err
				}
			}
			got += int64(len(ids))
		}
	}
	return nil
}

func isBusyGroup(err error) bool {
	return err != nil && len(err.Error()) >= 9 && err.Error()[:9] == "BUSYGROUP"
}

func (b *redisSource) publisher(_ context.Context, stream string) (func(context.Context, []byte) error, error) {
	return func(ctx context.Context, body []byte) error {
		return b.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"body", body}}).Err()
	}, nil
}

func (b *redisSource) sourceInput(name, conn, stream string) client.SourceInput {
	return client.SourceInput{Name: name, Type: "redis", Connection: conn, Stream: stream}
}

func (b *redisSource) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.streams) > 0 {
		_ = b.rdb.Del(context.Background(), b.streams...).Err()
	}
	b.rdb.Close()
}
