package redissrc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/heraldhq/herald/source"
)

// unblockTimeout bounds the CLIENT UNBLOCK sent when Receive's context
// ends.
const unblockTimeout = 2 * time.Second

// Receive returns up to min(max, prefetch) entries: first this consumer's
// own pending ones, then any another consumer left idle past minIdle,
// then new ones, blocking until one arrives or ctx ends.
func (c *consumer) Receive(ctx context.Context, max int) ([]*source.Message, error) {
	n := int64(min(max, c.prefetch))
	if n < 1 {
		n = 1
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c.history != "" {
			msgs, err := c.readHistory(ctx, n)
			if err != nil || len(msgs) > 0 {
				return msgs, err
			}
			continue
		}
		if !time.Now().Before(c.nextClaim) {
			msgs, err := c.claim(ctx, n)
			if err != nil || len(msgs) > 0 {
				return msgs, err
			}
		}
		msgs, err := c.readNew(ctx, n)
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
	}
}

// readHistory reads the next page of this consumer's own pending entries;
// the first empty page ends the history.
func (c *consumer) readHistory(ctx context.Context, n int64) ([]*source.Message, error) {
	// Block -1 omits BLOCK (Redis ignores it for an explicit id anyway).
	res, err := c.reader.XReadGroup(ctx, &redis.XReadGroupArgs{Group: c.group, Consumer: c.name,
		Streams: []string{c.stream, c.history}, Count: n, Block: -1}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, c.readError(ctx, err)
	}
	msgs := c.messages(res)
	if len(msgs) == 0 {
		c.history = ""
		return nil, nil
	}
	c.history = msgs[len(msgs)-1].Token.(string)
	return msgs, nil
}

// claim takes over entries pending on other consumers for longer than
// minIdle, one XAUTOCLAIM page per call; a finished scan waits
// claimInterval.
func (c *consumer) claim(ctx context.Context, n int64) ([]*source.Message, error) {
	entries, next, err := c.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: c.stream, Group: c.group,
		Consumer: c.name, MinIdle: c.minIdle, Start: c.claimCursor, Count: n}).Result()
	if err != nil {
		return nil, c.readError(ctx, err)
	}
	c.claimCursor = next
	if next == "0-0" {
		c.nextClaim = time.Now().Add(c.claimInterval)
	}
	return c.messages([]redis.XStream{{Stream: c.stream, Messages: entries}}), nil
}

// readNew waits for new entries, at most readBlock (less when ctx's
// deadline or the next claim scan is nearer). ctx does not reach the
// client: its deadline would become the socket's, and a socket timeout
// breaks the connection. A cancelled ctx instead unblocks the read
// (CLIENT UNBLOCK), which then answers no entries.
func (c *consumer) readNew(ctx context.Context, n int64) ([]*source.Message, error) {
	block := min(readBlock, time.Until(c.nextClaim))
	if dl, ok := ctx.Deadline(); ok {
		block = min(block, time.Until(dl))
	}
	block = max(block, time.Millisecond)
	stop := func() bool { return true }
	unblocked := make(chan struct{})
	if c.readerID != 0 {
		stop = context.AfterFunc(ctx, func() {
			defer close(unblocked)
			c.unblock()
		})
	}
	res, err := c.reader.XReadGroup(context.WithoutCancel(ctx), &redis.XReadGroupArgs{Group: c.group,
		Consumer: c.name, Streams: []string{c.stream, ">"}, Count: n, Block: block}).Result()
	if !stop() {
		// The unblock started: let it finish before the caller may close
		// the client under it.
		<-unblocked
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, c.readError(ctx, err)
	}
	// Entries read even as ctx ended are returned: they are pending on
	// this consumer now, and the runner settles or abandons them.
	return c.messages(res), nil
}

// unblock makes the reader's XREADGROUP return now, as if its block
// expired (CLIENT UNBLOCK answers no entries).
func (c *consumer) unblock() {
	ctx, cancel := context.WithTimeout(context.Background(), unblockTimeout)
	defer cancel()
	_ = c.rdb.ClientUnblock(ctx, c.readerID).Err()
}

// readError is ctx's error when it ended, else err worded for the
// source's status.
func (c *consumer) readError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if isServerError(err) {
		// NOGROUP after a restart that lost the data, WRONGTYPE, NOPERM...:
		// the runner dials again, which recreates a missing group.
		return fmt.Errorf("reading redis stream %q (group %q): %w", c.stream, c.group, err)
	}
	return fmt.Errorf("redis connection: %w", err)
}

// messages converts XREADGROUP's reply to messages, in stream order.
func (c *consumer) messages(res []redis.XStream) []*source.Message {
	var out []*source.Message
	for _, s := range res {
		for _, e := range s.Messages {
			out = append(out, c.message(s.Stream, e))
		}
	}
	return out
}

// message converts one entry: "body" is the body, the other fields the
// headers; an entry without a body field (or deleted while pending) has
// an empty body, which the runner rejects as not_json.
func (c *consumer) message(stream string, e redis.XMessage) *source.Message {
	m := &source.Message{Route: stream, Token: e.ID, Timestamp: entryTime(e.ID)}
	for k, v := range e.Values {
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		if k == "body" {
			m.Body = []byte(s)
			continue
		}
		if m.Headers == nil {
			m.Headers = make(map[string]string, len(e.Values))
		}
		m.Headers[k] = s
	}
	return m
}

// entryTime is the time in an entry id ("<ms>-<seq>"); zero when the id
// is not of that form.
func entryTime(id string) time.Time {
	ms, _, ok := strings.Cut(id, "-")
	if !ok {
		return time.Time{}
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}
