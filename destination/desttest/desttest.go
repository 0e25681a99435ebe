package desttest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/webhook"
)

// Run runs the conformance suite against h: single sends (one message per
// Send, body and signature headers, the official Standard Webhooks
// verifier, herald-* headers, failure classes), then the engine cases
// through a real delivery.Engine on a SQLite store (engine.go). A harness
// that implements Unsigned skips the header cases (see Unsigned).
func Run(t *testing.T, h Harness) {
	pub := h.Publisher(t)
	t.Cleanup(pub.Close)
	t.Run("SendDeliversOnce", func(t *testing.T) { testSendOnce(t, h, pub) })
	t.Run("Signature", func(t *testing.T) { testSignature(t, h, pub) })
	t.Run("HeraldHeaders", func(t *testing.T) { testHeraldHeaders(t, h, pub) })
	t.Run("Broken", func(t *testing.T) { testBroken(t, h, pub) })
	t.Run("ConnectionUnavailable", func(t *testing.T) { testConnectionUnavailable(t, h, pub) })
	t.Run("Engine", func(t *testing.T) { runEngine(t, h, pub) })
}

// TestSecret signs every request of the suite.
const TestSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// waitMessage bounds how long the suite waits for a message it expects;
// waitNone is how long it listens for one it does not expect (a second
// copy) before concluding there is none.
const (
	waitMessage = 20 * time.Second
	waitNone    = 700 * time.Millisecond
)

// unsigned is why h's messages carry no headers (Unsigned), "" when they
// carry them.
func unsigned(h Harness) string {
	if u, ok := h.(Unsigned); ok {
		return u.Unsigned()
	}
	return ""
}

// skipUnsigned skips a case that reads message headers when h has none.
func skipUnsigned(t *testing.T, h Harness) {
	t.Helper()
	if why := unsigned(h); why != "" {
		t.Skipf("SKIP: destination type %s delivers no headers to check: %s", h.Type(), why)
	}
}

// messageID tells the suite's messages apart: the webhook-id header (the
// delivery id), or for an Unsigned harness the body's "id" (the event
// id). Every case sends each event once per subscription, so within one
// Target either names one delivery.
func messageID(t *testing.T, h Harness, m *Received) string {
	t.Helper()
	if unsigned(h) != "" {
		return decode(t, m).ID
	}
	return m.Headers[destination.HeaderID]
}

// requestID is the messageID the message of req arrives with.
func requestID(h Harness, req *webhook.Request) string {
	if unsigned(h) != "" {
		return req.EventID
	}
	return req.MsgID
}

// newRequest is one attempt of a fresh delivery of a fresh event to d.
func newRequest(d herald.Destination, eventType, tenant string, data any) *webhook.Request {
	evID := herald.NewID(herald.PrefixEvent)
	now := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{"id": evID, "type": eventType,
		"timestamp": herald.FormatTime(now), "data": data})
	return &webhook.Request{
		Body: body, MsgID: herald.NewID(herald.PrefixDelivery), Secrets: []string{TestSecret},
		Attempt: 1, EventType: eventType, SubscriptionID: herald.NewID(herald.PrefixSubscription),
		Timeout: 10 * time.Second, Timestamp: now, Destination: d, EventID: evID, Tenant: tenant,
	}
}

// uniqueType is an event type no other test publishes.
func uniqueType(prefix string) string {
	return prefix + "." + strings.ToLower(strings.TrimPrefix(herald.NewID(""), "_"))
}

// next waits for the consumer's next message.
func next(t *testing.T, c Consumer) *Received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitMessage)
	defer cancel()
	m, err := c.Next(ctx)
	require.NoError(t, err, "no message arrived within %s", waitMessage)
	return m
}

// requireNone checks that no further message arrives within waitNone.
func requireNone(t *testing.T, c Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitNone)
	defer cancel()
	m, err := c.Next(ctx)
	if err == nil {
		t.Fatalf("an unexpected message arrived: headers %v body %s", m.Headers, m.Body)
	}
}

func requireSuccess(t *testing.T, res webhook.Result) {
	t.Helper()
	require.True(t, res.Success, "send failed: %s: %s", res.Class, res.Message)
	require.Equal(t, herald.ErrorNone, res.Class)
}

func testSendOnce(t *testing.T, h Harness, pub destination.Publisher) {
	d, c := h.Target(t)
	req := newRequest(d, uniqueType("desttest.once"), "", map[string]any{"n": 1, "text": "héllo <&>"})
	requireSuccess(t, pub.Send(context.Background(), req))
	m := next(t, c)
	require.Equal(t, string(req.Body), string(m.Body), "the body is the webhook body, byte for byte")
	require.Equal(t, requestID(h, req), messageID(t, h, m))
	requireNone(t, c)
}

func httpHeader(h map[string]string) http.Header {
	out := http.Header{}
	for k, v := range h {
		out.Set(k, v)
	}
	return out
}

func testSignature(t *testing.T, h Harness, pub destination.Publisher) {
	skipUnsigned(t, h)
	d, c := h.Target(t)
	// Two secrets (a rotation): both sign, each verifies alone.
	other := webhook.NewSecret()
	var got []*Received
	for i := range 3 {
		req := newRequest(d, uniqueType("desttest.sig"), "", map[string]any{"i": i})
		req.Secrets = []string{TestSecret, other}
		requireSuccess(t, pub.Send(context.Background(), req))
		m := next(t, c)
		got = append(got, m)
		for _, secret := range []string{TestSecret, other} {
			require.NoError(t, webhook.Verify([]string{secret}, httpHeader(m.Headers), m.Body, time.Now(), 5*time.Minute),
				"webhook.Verify of the broker message")
		}
		require.Error(t, webhook.Verify([]string{TestSecret}, httpHeader(m.Headers), append(bytes.Clone(m.Body), ' '), time.Now(), 5*time.Minute),
			"a changed body must not verify")
		require.Equal(t, req.MsgID, m.Headers[destination.HeaderID])
		require.Equal(t, strconv.FormatInt(req.Timestamp.Unix(), 10), m.Headers[destination.HeaderTimestamp])
	}
	verifyWithNode(t, got)
}

// verifyWithNode runs the official Standard Webhooks verifier (npm
// standardwebhooks, e2e/dest-node) on the messages, and on one with its
// body changed, which must fail. .ci/run installs it (npm ci); elsewhere
// the check skips, visibly, until `npm ci` ran in e2e/dest-node.
func verifyWithNode(t *testing.T, msgs []*Received) {
	t.Helper()
	dir := nodeDir(t)
	node, err := exec.LookPath("node")
	if err != nil || dir == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or e2e/dest-node/node_modules is missing (CI=true: .ci/run runs npm ci there): %v", err)
		}
		t.Skip("SKIP: run `npm ci` in e2e/dest-node (and have Node.js) to verify with the official Standard Webhooks library")
	}
	type input struct {
		Secret     string            `json:"secret"`
		Headers    map[string]string `json:"headers"`
		BodyBase64 string            `json:"body_base64"`
		Tamper     bool              `json:"tamper"`
	}
	var in []input
	for _, m := range msgs {
		in = append(in, input{Secret: TestSecret, Headers: m.Headers, BodyBase64: base64.StdEncoding.EncodeToString(m.Body)})
	}
	last := msgs[len(msgs)-1]
	in = append(in, input{Secret: TestSecret, Headers: last.Headers, Tamper: true,
		BodyBase64: base64.StdEncoding.EncodeToString(append(bytes.Clone(last.Body), ' '))})
	data, err := json.Marshal(in) //nolint:gosec // G117: the suite's own test secret, handed to the verifier on its stdin
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "verify.js") //nolint:gosec // G204: node found on PATH, a fixed script
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, fmt.Sprintf("OK %d", len(in)), strings.TrimSpace(string(out)))
}

// nodeDir is e2e/dest-node of the module the test runs in, "" when its
// node_modules are not installed.
func nodeDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	nd := filepath.Join(dir, "e2e", "dest-node")
	if _, err := os.Stat(filepath.Join(nd, "node_modules", "standardwebhooks")); err != nil {
		return ""
	}
	return nd
}

func testHeraldHeaders(t *testing.T, h Harness, pub destination.Publisher) {
	skipUnsigned(t, h)
	d, c := h.Target(t)
	typ := uniqueType("desttest.headers")
	req := newRequest(d, typ, "acme", map[string]any{})
	req.Attempt = 3
	res := pub.Send(context.Background(), req)
	requireSuccess(t, res)
	m := next(t, c)
	require.Equal(t, typ, m.Headers[destination.HeaderEventType])
	require.Equal(t, "acme", m.Headers[destination.HeaderTenant])
	require.Equal(t, "3", m.Headers[destination.HeaderAttempt])

	// The attempt records the headers the message carried, the
	// signature redacted (issue 24 item 17).
	for _, name := range []string{destination.HeaderID, destination.HeaderTimestamp, destination.HeaderEventType,
		destination.HeaderTenant, destination.HeaderAttempt} {
		require.Equal(t, m.Headers[name], res.RequestHeaders[name], name)
	}
	require.True(t, strings.HasPrefix(m.Headers[destination.HeaderSignature], "v1,"))
	require.Equal(t, "v1,***", res.RequestHeaders[destination.HeaderSignature])

	// Untenanted: no herald-tenant at all.
	req = newRequest(d, typ, "", map[string]any{})
	requireSuccess(t, pub.Send(context.Background(), req))
	m = next(t, c)
	require.Equal(t, typ, m.Headers[destination.HeaderEventType])
	_, ok := m.Headers[destination.HeaderTenant]
	require.False(t, ok, "an untenanted event carries no herald-tenant header: %v", m.Headers)
}

func testBroken(t *testing.T, h Harness, pub destination.Publisher) {
	d, class, ok := h.Broken(t)
	if !ok {
		t.Skipf("SKIP: destination type %s has no failure of its own", h.Type())
	}
	for range 2 { // the failure leaves the publisher usable: same answer again
		res := pub.Send(context.Background(), newRequest(d, uniqueType("desttest.broken"), "", map[string]any{}))
		require.False(t, res.Success)
		require.Equal(t, class, res.Class, "message: %s", res.Message)
		require.NotEmpty(t, res.Message)
		if h.Type().UsesConnection() {
			require.False(t, res.Permanent, "a broker failure is retried through the tiers")
		}
	}
	// ...and the good target still works.
	good, c := h.Target(t)
	req := newRequest(good, uniqueType("desttest.afterbroken"), "", map[string]any{})
	requireSuccess(t, pub.Send(context.Background(), req))
	require.Equal(t, requestID(h, req), messageID(t, h, next(t, c)))
}

// missingConnection is the type's destination naming a connection that
// does not exist.
const missingConnection = "desttest-missing-connection"

func testConnectionUnavailable(t *testing.T, h Harness, pub destination.Publisher) {
	if !h.Type().UsesConnection() {
		t.Skipf("SKIP: destination type %s uses no connection", h.Type())
	}
	d, _ := h.Target(t)
	d.Connection = missingConnection
	res := pub.Send(context.Background(), newRequest(d, uniqueType("desttest.noconn"), "", map[string]any{}))
	require.False(t, res.Success)
	require.Equal(t, herald.ErrorConnectionUnset, res.Class, "message: %s", res.Message)
}

// collect reads n messages, then checks no further one arrives.
func collect(t *testing.T, c Consumer, n int) []*Received {
	t.Helper()
	out := make([]*Received, 0, n)
	for range n {
		out = append(out, next(t, c))
	}
	requireNone(t, c)
	return out
}

// envelope is the part of a delivered body the engine cases read.
type envelope struct {
	ID      string `json:"id"`
	Key     string `json:"key"`
	Version *int64 `json:"version"`
	Data    struct {
		Seq int `json:"seq"`
	} `json:"data"`
}

func decode(t *testing.T, m *Received) envelope {
	t.Helper()
	var e envelope
	require.NoError(t, json.Unmarshal(m.Body, &e), "body %s", m.Body)
	return e
}
