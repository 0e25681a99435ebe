package redisdest_test

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/destination/desttest"
	redisdest "github.com/heraldhq/herald/destination/redis"
	"github.com/heraldhq/herald/webhook"
)

// secret signs every test request.
var secret = webhook.NewSecret()

// request is one attempt of an event to d.
func request(d herald.Destination) *webhook.Request {
	evt := herald.NewID(herald.PrefixEvent)
	return &webhook.Request{
		Body:      []byte(`{"id":"` + evt + `","type":"order.paid","data":{"n":1}}`),
		MsgID:     herald.NewID(herald.PrefixDelivery),
		Secrets:   []string{secret},
		Attempt:   1,
		EventType: "order.paid",
		Timeout:   5 * time.Second,
		EventID:   evt,
		Tenant:    "acme",

		Destination: d,
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// One Send is one entry, with id, type, timestamp, the signature headers
// and the body, in that order; the signature verifies as a webhook's.
func TestSendAppendsOneSignedEntry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.Publisher(t)
	d, _ := h.Target(t)
	r := request(d)
	res := p.Send(context.Background(), r)
	require.True(t, res.Success, "%s: %s", res.Class, res.Message)

	ctx := context.Background()
	entries, err := h.rdb.XRange(ctx, d.Stream, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "entry "+entries[0].ID, res.Excerpt)

	// Field order as documented, read raw (XMessage.Values is a map).
	raw, err := h.rdb.Do(ctx, "XRANGE", d.Stream, "-", "+").Slice()
	require.NoError(t, err)
	kv := raw[0].([]any)[1].([]any)
	var names []string
	for i := 0; i < len(kv); i += 2 {
		names = append(names, kv[i].(string))
	}
	require.Equal(t, []string{"id", "type", "timestamp",
		"herald-attempt", "herald-event-type", "herald-tenant",
		"webhook-id", "webhook-signature", "webhook-timestamp", "body"}, names)

	v := entries[0].Values
	require.Equal(t, r.MsgID, v["id"])
	require.Equal(t, "order.paid", v["type"])
	require.Equal(t, v["webhook-timestamp"], v["timestamp"])
	require.Equal(t, r.MsgID, v["webhook-id"])
	require.Equal(t, "order.paid", v["herald-event-type"])
	require.Equal(t, "acme", v["herald-tenant"])
	require.Equal(t, "1", v["herald-attempt"])
	require.Equal(t, string(r.Body), v["body"])

	hdr := http.Header{}
	for _, k := range []string{destination.HeaderID, destination.HeaderTimestamp, destination.HeaderSignature} {
		hdr.Set(k, v[k].(string))
	}
	require.NoError(t, webhook.Verify([]string{secret}, hdr, []byte(v["body"].(string)), time.Now(), 0))
	require.Error(t, webhook.Verify([]string{webhook.NewSecret()}, hdr, []byte(v["body"].(string)), time.Now(), 0))
}

// MAXLEN is approximate: the stream is trimmed in whole nodes, so it keeps
// at least maxlen entries and at most maxlen plus one node's worth.
func TestMaxLenTrims(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.Publisher(t)
	d, _ := h.Target(t)
	d.MaxLen = 10
	const n = 500
	for range n {
		res := p.Send(context.Background(), request(d))
		require.True(t, res.Success, "%s: %s", res.Class, res.Message)
	}
	ctx := context.Background()
	node, err := h.rdb.ConfigGet(ctx, "stream-node-max-entries").Result()
	require.NoError(t, err)
	perNode, err := strconv.Atoi(node["stream-node-max-entries"])
	require.NoError(t, err)
	length, err := h.rdb.XLen(ctx, d.Stream).Result()
	require.NoError(t, err)
	t.Logf("%d entries appended with maxlen 10 leave %d (stream-node-max-entries %d)", n, length, perNode)
	require.GreaterOrEqual(t, length, int64(10))
	require.LessOrEqual(t, length, int64(10+perNode))

	// Without maxlen nothing is trimmed.
	d2, _ := h.Target(t)
	for range 150 {
		require.True(t, p.Send(ctx, request(d2)).Success)
	}
	require.Equal(t, int64(150), h.rdb.XLen(ctx, d2.Stream).Val())
}

// A key of another type is the broker's refusal, with its message.
func TestWrongTypeIsBrokerError(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.Publisher(t)
	d, class, _ := h.Broken(t)
	res := p.Send(context.Background(), request(d))
	require.False(t, res.Success)
	require.Equal(t, herald.ErrorBroker, class)
	require.Equal(t, herald.ErrorBroker, res.Class)
	require.Contains(t, res.Message, "WRONGTYPE")
	require.False(t, res.Permanent, "retried through the tiers: an operator can fix the key")
}

// A Redis that is not there fails the attempt as a connection error, at
// once and again on the next attempt (the client does not retry).
func TestRedisDownIsConnectionError(t *testing.T) {
	t.Parallel()
	conns := destination.NewStatic(&herald.Connection{Name: "down", Type: herald.DestinationRedis,
		URL: "redis://" + closedPort(t) + "/0", AllTenants: true})
	p := redisdest.New(redisdest.Config{Connections: conns})
	t.Cleanup(p.Close)
	d := herald.Destination{Type: herald.DestinationRedis, Connection: "down", Stream: "s"}
	for range 3 {
		res := p.Send(context.Background(), request(d))
		require.False(t, res.Success)
		require.Contains(t, []herald.ErrorClass{herald.ErrorConnection, herald.ErrorTimeout}, res.Class, res.Message)
		require.NotEmpty(t, res.Message)
	}
}

// A Redis that accepts but never answers times out within the attempt's
// timeout, not the client's own (longer) one.
func TestSilentRedisTimesOut(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	conns := destination.NewStatic(&herald.Connection{Name: "silent", Type: herald.DestinationRedis,
		URL: "redis://" + ln.Addr().String() + "/0", AllTenants: true})
	p := redisdest.New(redisdest.Config{Connections: conns})
	t.Cleanup(p.Close)
	r := request(herald.Destination{Type: herald.DestinationRedis, Connection: "silent", Stream: "s"})
	r.Timeout = 300 * time.Millisecond
	res := p.Send(context.Background(), r)
	require.Equal(t, herald.ErrorTimeout, res.Class, res.Message)
	require.Contains(t, res.Message, "300ms")
}

// Changing a connection's URL makes the next attempt use the new one.
func TestConnectionURLChangeRedials(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.Publisher(t)
	d, _ := h.Target(t)
	ctx := context.Background()
	require.True(t, p.Send(ctx, request(d)).Success)

	opt, err := redis.ParseURL(h.url)
	require.NoError(t, err)
	opt.DB = 3
	db3 := redis.NewClient(opt)
	t.Cleanup(func() { _ = db3.Del(ctx, d.Stream).Err(); _ = db3.Close() })
	h.conns.Put(&herald.Connection{Name: connName, Type: herald.DestinationRedis, URL: "redis://" + opt.Addr + "/3", AllTenants: true})
	require.True(t, p.Send(ctx, request(d)).Success)
	require.Equal(t, int64(1), h.rdb.XLen(ctx, d.Stream).Val(), "the old database got only the first")
	require.Equal(t, int64(1), db3.XLen(ctx, d.Stream).Val(), "the new URL got the second")
}

// What the destination or its connection gets wrong fails before sending.
func TestInvalidDestinations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := h.Publisher(t)
	ctx := context.Background()

	res := p.Send(ctx, request(herald.Destination{Type: herald.DestinationRedis, Connection: connName}))
	require.Equal(t, herald.ErrorInvalidRequest, res.Class)

	res = p.Send(ctx, request(herald.Destination{Type: herald.DestinationRedis, Connection: "nope", Stream: "s"}))
	require.Equal(t, herald.ErrorConnectionUnset, res.Class)

	h.conns.Put(&herald.Connection{Name: "bad", Type: herald.DestinationRedis, URL: "http://x:secretpw@127.0.0.1/", AllTenants: true})
	res = p.Send(ctx, request(herald.Destination{Type: herald.DestinationRedis, Connection: "bad", Stream: "s"}))
	require.Equal(t, herald.ErrorConnectionUnset, res.Class)
	require.NotContains(t, res.Message, "secretpw")

	r := request(herald.Destination{Type: herald.DestinationRedis, Connection: connName, Stream: "s"})
	r.Secrets = nil
	require.Equal(t, herald.ErrorInvalidRequest, p.Send(ctx, r).Class, "never an unsigned entry")

	p.Close()
	res = p.Send(ctx, request(herald.Destination{Type: herald.DestinationRedis, Connection: connName, Stream: "s"}))
	require.Equal(t, herald.ErrorConnection, res.Class)
}

// An attempt stuck on a Redis that does not answer holds no other
// connection's attempts: they complete while it waits, and it ends as a
// connection error when the server goes away.
func TestStuckRedisDoesNotHoldOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	silent := desttest.NewHoldingServer(t)
	h.conns.Put(&herald.Connection{Name: "silent", Type: herald.DestinationRedis, URL: "redis://" + silent.Addr + "/0", AllTenants: true})
	p := h.Publisher(t)

	done := make(chan webhook.Result, 1)
	go func() {
		r := request(herald.Destination{Type: herald.DestinationRedis, Connection: "silent", Stream: "s"})
		r.Timeout = time.Minute
		done <- p.Send(context.Background(), r)
	}()
	select {
	case <-silent.Accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck attempt never connected")
	}
	d, _ := h.Target(t)
	for range 20 {
		res := p.Send(context.Background(), request(d))
		require.True(t, res.Success, "%s: %s", res.Class, res.Message)
	}
	select {
	case res := <-done:
		// Only the client's own read timeout (10 s) could end it this early.
		t.Fatalf("the stuck attempt ended before the others were sent: %s %s", res.Class, res.Message)
	default:
	}
	silent.Release()
	res := <-done
	require.Equal(t, herald.ErrorConnection, res.Class, res.Message)
}

// A client no attempt used for 10 minutes (its connection deleted, say) is
// closed; one in use stays.
func TestIdleClientClosed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.conns.Put(&herald.Connection{Name: "other", Type: herald.DestinationRedis, URL: h.url, AllTenants: true})
	p := redisdest.New(redisdest.Config{Connections: h.conns})
	t.Cleanup(p.Close)
	now := time.Now()
	redisdest.SetNow(p, func() time.Time { return now })
	d, _ := h.Target(t)
	other := d
	other.Connection = "other"
	ctx := context.Background()
	require.True(t, p.Send(ctx, request(d)).Success)
	require.True(t, p.Send(ctx, request(other)).Success)
	require.Equal(t, 2, redisdest.Clients(p))

	now = now.Add(9 * time.Minute)
	require.True(t, p.Send(ctx, request(d)).Success)
	require.Equal(t, 2, redisdest.Clients(p), "9 minutes idle is not enough")
	now = now.Add(2 * time.Minute) // "other" idle 11 minutes, d 2
	require.True(t, p.Send(ctx, request(d)).Success)
	require.Equal(t, 1, redisdest.Clients(p))
	require.True(t, p.Send(ctx, request(other)).Success, "a swept connection dials again when used")
	require.Equal(t, 2, redisdest.Clients(p))
}

// tlsServer is a TLS listener with a certificate no system trusts; it
// writes its PEM to a file for a connection's tls.ca_file.
func tlsServer(t *testing.T) (addr, caFile string) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	return srv.Listener.Addr().String(), caFile
}

// An untrusted certificate fails as tls; trusted through tls.ca_file the
// handshake passes (and the server, not Redis, fails otherwise).
func TestTLS(t *testing.T) {
	t.Parallel()
	addr, caFile := tlsServer(t)
	conns := destination.NewStatic(
		&herald.Connection{Name: "untrusted", Type: herald.DestinationRedis, URL: "rediss://" + addr + "/0", AllTenants: true},
		&herald.Connection{Name: "trusted", Type: herald.DestinationRedis, URL: "rediss://" + addr + "/0", AllTenants: true,
			TLS: &herald.ConnectionTLS{CAFile: caFile}})
	p := redisdest.New(redisdest.Config{Connections: conns})
	t.Cleanup(p.Close)
	res := p.Send(context.Background(), request(herald.Destination{Type: herald.DestinationRedis, Connection: "untrusted", Stream: "s"}))
	require.Equal(t, herald.ErrorTLS, res.Class, res.Message)
	require.Contains(t, res.Message, "certificate")

	res = p.Send(context.Background(), request(herald.Destination{Type: herald.DestinationRedis, Connection: "trusted", Stream: "s"}))
	require.False(t, res.Success)
	require.NotEqual(t, herald.ErrorTLS, res.Class, "the CA file is trusted: %s", res.Message)
}
