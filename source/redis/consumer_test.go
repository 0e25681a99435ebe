package redissrc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/source"
	redissrc "github.com/heraldhq/herald/source/redis"
)

// env is a Redis client and a fresh stream for one test.
type env struct {
	url    string
	rdb    *redis.Client
	stream string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	u := testbroker.URL(t, testbroker.Redis)
	opt, err := redis.ParseURL(u)
	require.NoError(t, err)
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	e := &env{url: u, rdb: rdb, stream: uniqueStream(t)}
	t.Cleanup(func() { _ = rdb.Del(context.Background(), e.stream, e.stream+":rejected").Err() })
	return e
}

// uniqueStream names a stream no other test (or helper) uses. It does not
// start with "herald.": a default event type (the stream) must not be
// reserved.
func uniqueStream(t *testing.T) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return fmt.Sprintf("srctest.%s.%d", name, time.Now().UnixNano())
}

func (e *env) params(node string, prefetch int) source.DialParams {
	return source.DialParams{
		Source:     &herald.Source{Name: "s", Type: herald.DestinationRedis, Connection: "c", Stream: e.stream},
		Connection: &herald.Connection{Name: "c", Type: herald.DestinationRedis, URL: e.url},
		Node:       node, Prefetch: prefetch,
	}
}

func (e *env) dial(t *testing.T, node string, prefetch int) source.Consumer {
	t.Helper()
	c, err := redissrc.Dial(context.Background(), e.params(node, prefetch))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// add appends n entries {body: {"n":i}, h: i} and returns their ids.
func (e *env) add(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := e.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: e.stream,
			Values: []any{"h", fmt.Sprint(i), "body", fmt.Sprintf(`{"n":%d}`, i)}}).Result()
		require.NoError(t, err)
		ids[i] = id
	}
	return ids
}

// pending is the group's count of entries delivered and not acknowledged.
func (e *env) pending(t *testing.T) int64 {
	t.Helper()
	p, err := e.rdb.XPending(context.Background(), e.stream, herald.DefaultSourceConsumer).Result()
	require.NoError(t, err)
	return p.Count
}

func receive(t *testing.T, c source.Consumer, max int) []*source.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := c.Receive(ctx, max)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	return msgs
}

func tokens(msgs []*source.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Token.(string)
	}
	return out
}

// requireNothing checks that c receives nothing within d.
func requireNothing(t *testing.T, c source.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	msgs, err := c.Receive(ctx, 100)
	require.ErrorIs(t, err, context.DeadlineExceeded, "received %v", tokens(msgs))
}

func TestMessageFields(t *testing.T) {
	e := newEnv(t)
	before := time.Now().Add(-time.Second)
	ctx := context.Background()
	id1, err := e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: e.stream, Values: []any{"body", `{"a":1}`, "x-h", "v"}}).Result()
	require.NoError(t, err)
	id2, err := e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: e.stream, Values: []any{"only", "header"}}).Result()
	require.NoError(t, err)
	c := e.dial(t, "n1", 10)
	msgs := receive(t, c, 10)
	require.Len(t, msgs, 2)

	m := msgs[0]
	require.Equal(t, `{"a":1}`, string(m.Body))
	require.Equal(t, map[string]string{"x-h": "v"}, m.Headers)
	require.Equal(t, e.stream, m.Route)
	require.Equal(t, id1, m.Token)
	require.Empty(t, m.MessageID, "an entry id is a position, not the message's id (doc.go)")
	require.WithinRange(t, m.Timestamp, before, time.Now().Add(time.Second))

	// No body field: an empty body, which the converter rejects as not_json.
	require.Equal(t, id2, msgs[1].Token)
	require.Nil(t, msgs[1].Body)
	require.Equal(t, map[string]string{"only": "header"}, msgs[1].Headers)
	conv, err := source.NewConverter(&herald.Source{Type: herald.DestinationRedis}, func([]byte) (*herald.Event, error) {
		return &herald.Event{}, nil
	}, 0)
	require.NoError(t, err)
	_, rj := conv.Convert(msgs[1])
	require.NotNil(t, rj)
	require.Equal(t, herald.RejectNotJSON, rj.Reason)
}

// TestPrefetchBound: with more entries waiting than the prefetch, no batch
// is larger and the group never holds more than prefetch unacknowledged.
func TestPrefetchBound(t *testing.T) {
	e := newEnv(t)
	const n, prefetch = 57, 10
	ids := e.add(t, n)
	c := e.dial(t, "n1", prefetch)
	var got []string
	for len(got) < n {
		msgs := receive(t, c, 1000) // the runner may ask for more; prefetch bounds it
		require.LessOrEqual(t, len(msgs), prefetch)
		require.EqualValues(t, len(msgs), e.pending(t), "only this batch is pending")
		require.NoError(t, c.Settle(context.Background(), msgs, nil))
		require.Zero(t, e.pending(t))
		got = append(got, tokens(msgs)...)
	}
	require.Equal(t, ids, got, "every entry once, in stream order")
	requireNothing(t, c, 300*time.Millisecond)
}

// TestCloseWithoutSettleRedelivers: what a consumer received and did not
// settle comes back to the same node when it dials again, and to another
// node once it has been idle for the claim time.
func TestCloseWithoutSettleRedelivers(t *testing.T) {
	e := newEnv(t)
	ids := e.add(t, 5)
	c := e.dial(t, "n1", 3)
	first := receive(t, c, 3)
	require.Equal(t, ids[:3], tokens(first))
	require.NoError(t, c.Close())

	// The same node re-reads its own pending entries first, then the rest.
	c = e.dial(t, "n1", 3)
	require.Equal(t, ids[:3], tokens(receive(t, c, 3)))
	require.Equal(t, ids[3:], tokens(receive(t, c, 3)))
	require.NoError(t, c.Close())
	require.EqualValues(t, 5, e.pending(t))

	// Another node: nothing until the entries are idle for minIdle, then
	// all of them.
	other, err := redissrc.DialClaiming(context.Background(), e.params("n2", 10), 700*time.Millisecond, 50*time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 5 && time.Now().Before(deadline) {
		msgs := receive(t, other, 10)
		require.NoError(t, other.Settle(context.Background(), msgs, nil))
		got = append(got, tokens(msgs)...)
	}
	require.ElementsMatch(t, ids, got)
	require.Zero(t, e.pending(t))
}

// TestRejectedNotRedelivered: a rejected entry is copied to
// <stream>:rejected with why, acknowledged, and never read again.
func TestRejectedNotRedelivered(t *testing.T) {
	e := newEnv(t)
	ids := e.add(t, 4)
	c := e.dial(t, "n1", 10)
	msgs := receive(t, c, 10)
	require.Len(t, msgs, 4)
	msgs[1].RejectReason, msgs[1].RejectMessage = herald.RejectNotJSON, "body is not JSON"
	msgs[3].RejectReason, msgs[3].RejectMessage = herald.RejectMapping, "no type"
	require.NoError(t, c.Settle(context.Background(), []*source.Message{msgs[0], msgs[2]}, []*source.Message{msgs[1], msgs[3]}))
	require.Zero(t, e.pending(t))

	dead, err := e.rdb.XRange(context.Background(), e.stream+":rejected", "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, dead, 2)
	require.Equal(t, map[string]any{"body": `{"n":1}`, "reason": herald.RejectNotJSON, "message": "body is not JSON",
		"id": ids[1], "headers": `{"h":"1"}`}, dead[0].Values)
	require.Equal(t, ids[3], dead[1].Values["id"])
	require.Equal(t, herald.RejectMapping, dead[1].Values["reason"])

	require.NoError(t, c.Close())
	requireNothing(t, e.dial(t, "n1", 10), 300*time.Millisecond)
	c2, err := redissrc.DialClaiming(context.Background(), e.params("n2", 10), time.Millisecond, time.Millisecond)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	requireNothing(t, c2, 300*time.Millisecond)
}

// TestReceiveCancelUnblocks: a cancelled Receive returns at once, not at
// the end of its blocking read.
func TestReceiveCancelUnblocks(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "n1", 10)
	require.NotZero(t, redissrc.ReaderID(c))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Receive(ctx, 10)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), redissrc.ReadBlock/2, "the blocked read was not released")

	// The consumer still works after an unblocked read.
	ids := e.add(t, 1)
	require.Equal(t, ids, tokens(receive(t, c, 10)))
}

// TestReceiveFailsOnBrokenConnection: when the server drops the
// connection under a blocked read, Receive returns an error (the runner
// then dials again) instead of hanging.
func TestReceiveFailsOnBrokenConnection(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "n1", 10)
	id := redissrc.ReaderID(c)
	require.NotZero(t, id)
	time.AfterFunc(200*time.Millisecond, func() {
		_ = e.rdb.ClientKillByFilter(context.Background(), "ID", fmt.Sprint(id)).Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Receive(ctx, 10)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "Receive returned only when its context ended")
	require.Less(t, time.Since(start), redissrc.ReadBlock, "a broken connection must not wait out the block")
}

// TestReceiveFailsWhenGroupLost: a group that vanished (a restart that
// kept no data, XGROUP DESTROY) is an error; dialling again recreates it.
func TestReceiveFailsWhenGroupLost(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "n1", 10)
	ids := e.add(t, 1)
	require.Equal(t, ids, tokens(receive(t, c, 10)))
	require.NoError(t, e.rdb.Del(context.Background(), e.stream).Err())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Receive(ctx, 10)
	require.ErrorContains(t, err, "NOGROUP")
	require.NoError(t, ctx.Err())
	c = e.dial(t, "n1", 10)
	ids = e.add(t, 2)
	require.Equal(t, ids, tokens(receive(t, c, 10)))
}

func TestPending(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "n1", 3)
	n, ok := c.Pending(context.Background())
	require.True(t, ok)
	require.Zero(t, n)
	e.add(t, 7)
	n, ok = c.Pending(context.Background())
	require.True(t, ok)
	require.EqualValues(t, 7, n)
	msgs := receive(t, c, 10)
	n, _ = c.Pending(context.Background())
	require.EqualValues(t, 7, n, "received, not yet acknowledged: still backlog")
	require.NoError(t, c.Settle(context.Background(), msgs, nil))
	n, _ = c.Pending(context.Background())
	require.EqualValues(t, 4, n)
}

// TestDialErrorsHideURL: no dial error carries the URL's password.
func TestDialErrorsHideURL(t *testing.T) {
	e := newEnv(t)
	for _, u := range []string{"redis://user:s3cret@127.0.0.1:1/0", "redis://user:s3cret@[::1/0", "redis://:s3cret@127.0.0.1:6379/x"} {
		p := e.params("n1", 1)
		p.Connection.URL = u
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := redissrc.Dial(ctx, p)
		cancel()
		if c != nil {
			_ = c.Close()
		}
		require.Error(t, err, u)
		require.NotContains(t, err.Error(), "s3cret")
	}
}

func TestDialRefusesBadSetup(t *testing.T) {
	e := newEnv(t)
	p := e.params("", 1)
	_, err := redissrc.Dial(context.Background(), p)
	require.ErrorContains(t, err, "node id")
	// The stream key holds a string: the group cannot be created.
	require.NoError(t, e.rdb.Set(context.Background(), e.stream, "x", 0).Err())
	_, err = redissrc.Dial(context.Background(), e.params("n1", 1))
	require.ErrorContains(t, err, "WRONGTYPE")
}

// TestRejectCopyFailsKeepsEntry: when the copy to <stream>:rejected fails,
// the rejected entry is not acknowledged (it comes back and is rejected
// again once the copy works); the committed ones are acknowledged anyway.
func TestRejectCopyFailsKeepsEntry(t *testing.T) {
	e := newEnv(t)
	ids := e.add(t, 2)
	require.NoError(t, e.rdb.Set(context.Background(), e.stream+":rejected", "not a stream", 0).Err())
	c := e.dial(t, "n1", 10)
	msgs := receive(t, c, 10)
	require.Len(t, msgs, 2)
	msgs[1].RejectReason, msgs[1].RejectMessage = herald.RejectNotJSON, "x"
	err := c.Settle(context.Background(), msgs[:1], msgs[1:])
	require.ErrorContains(t, err, "WRONGTYPE")
	require.EqualValues(t, 1, e.pending(t), "the committed entry is acknowledged, the rejected one is not")
	require.NoError(t, c.Close())

	require.NoError(t, e.rdb.Del(context.Background(), e.stream+":rejected").Err())
	c = e.dial(t, "n1", 10)
	again := receive(t, c, 10)
	require.Equal(t, ids[1:], tokens(again))
	again[0].RejectReason, again[0].RejectMessage = herald.RejectNotJSON, "x"
	require.NoError(t, c.Settle(context.Background(), nil, again))
	require.Zero(t, e.pending(t))
	require.Equal(t, 1, int(e.rdb.XLen(context.Background(), e.stream+":rejected").Val()))
}
