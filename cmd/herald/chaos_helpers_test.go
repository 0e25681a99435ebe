package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
)

// This file holds the chaos test's machinery: a node whose logs may be read
// while it runs, hostile receivers, the healthy receiver that records every
// delivery, a paced load generator, the log of what herald acknowledged and
// when each subscription was live, and the PostgreSQL role whose connection
// slots the test exhausts.

// syncBuffer is an io.Writer safe for concurrent use that keeps the last
// logKeep bytes, so a node's logs can be quoted while it still writes them.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

const logKeep = 1 << 20

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	if len(s.b) > 4*logKeep {
		s.b = append([]byte(nil), s.b[len(s.b)-logKeep:]...)
	}
	return len(p), nil
}

// String returns what was kept (the last logKeep bytes at least).
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

// Tail returns the last n bytes written.
func (s *syncBuffer) Tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.b) <= n {
		return string(s.b)
	}
	return "…" + string(s.b[len(s.b)-n:])
}

// chaosNode is one herald process; done closes when it has exited.
type chaosNode struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startChaosNode starts `herald serve` on addr, its output appended to
// logs, and waits (deadline 30 s) until /readyz answers 200.
func startChaosNode(t *testing.T, bin, addr string, logs *syncBuffer, args []string) *chaosNode {
	t.Helper()
	_, _ = fmt.Fprintf(logs, "--- herald serve %s\n", strings.Join(args, " "))
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "HERALD_LOG_LEVEL=warn")
	require.NoError(t, cmd.Start())
	n := &chaosNode{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(n.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-n.done })
	waitFor(t, 30*time.Second, func() (bool, string) {
		select {
		case <-n.done:
			return false, "herald exited"
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	}, func(last string) string {
		return fmt.Sprintf("herald did not become ready (%s); logs:\n%s", last, logs.Tail(8<<10))
	})
	return n
}

func (n *chaosNode) kill9(t *testing.T) {
	t.Helper()
	require.NoError(t, n.cmd.Process.Signal(syscall.SIGKILL))
	<-n.done
}

// waitFor polls cond every 25 ms until it holds or the deadline passes, and
// then fails the test fatally with msg(last detail cond gave).
func waitFor(t *testing.T, d time.Duration, cond func() (bool, string), msg func(last string) string) {
	t.Helper()
	if !poll(d, 25*time.Millisecond, cond) {
		_, last := cond()
		t.Fatal(msg(last))
	}
}

// poll reports whether cond held before d passed, checking it every
// interval.
func poll(d, interval time.Duration, cond func() (bool, string)) bool {
	deadline := time.Now().Add(d)
	for {
		if ok, _ := cond(); ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

// lockedRand is a seeded source shared by goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *mrand.Rand
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// ---------------------------------------------------------------------------
// Receivers

// recorder is the healthy receiver: it answers 204 at once and records the
// first arrival of every (subscription, event).
type recorder struct {
	mu    sync.Mutex
	first map[string]map[string]time.Time // subscription id → event id → first arrival
}

func newRecorder() *recorder { return &recorder{first: map[string]map[string]time.Time{}} }

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(req.Body)
	var ev struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(body, &ev)
	sub := req.Header.Get("Herald-Subscription-Id")
	r.mu.Lock()
	m := r.first[sub]
	if m == nil {
		m = map[string]time.Time{}
		r.first[sub] = m
	}
	if _, ok := m[ev.ID]; !ok {
		m[ev.ID] = now
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// arrival returns when event first reached sub.
func (r *recorder) arrival(sub, event string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.first[sub][event]
	return at, ok
}

// quietTLSServer starts an HTTPS test server whose handshake errors are not
// logged (herald refuses its certificate on every attempt).
func quietTLSServer(t *testing.T, h http.Handler, cert *tls.Certificate) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if cert != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// Paths of the raw TCP receiver, one hostile behaviour each.
const (
	rawBadHeaders  = "/bad-headers"  // NUL and invalid UTF-8 in the status line and header lines
	rawHugeHeaders = "/huge-headers" // 96 KiB of headers, beyond the sender's 64 KiB limit
	rawBadBody     = "/bad-body"     // 500 whose reason phrase and body are invalid UTF-8 with NUL
	rawReset       = "/reset"        // TCP reset after reading the request
)

// badHeaderAnswers are malformed answers; the sender's error text quotes
// them (net/http formats them with %q today, but herald must not rely on
// that).
var badHeaderAnswers = []string{
	"HTTP/1.1 200 OK\r\nX-Bad: \xff\xfe\x00z\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\n\xff\xfe\x00no-colon\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 2\xff\x00 OK\r\nContent-Length: 0\r\n\r\n",
	"\xff\xfe\x00 not http at all\r\n\r\n",
	"HTTP/1.1 200 \xc3\x28\x00\r\nX-Latin1: caf\xe9\r\nContent-Length: 0\r\n\r\n",
}

// startRawServer serves the raw hostile answers above, choosing among the
// bad-header variants with rng. It returns the base URL.
func startRawServer(t *testing.T, rng *lockedRand) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	huge := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 1015)+"\r\n", 96) + "Content-Length: 0\r\n\r\n"
	body := "\xff\x00\xfe<html>caf\xe9\x00\x01\x1b[31m" + strings.Repeat("\xc3", 3)
	badBody := fmt.Sprintf("HTTP/1.1 500 \xff\xfe\x00\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				switch req.URL.Path {
				case rawBadHeaders:
					_, _ = io.WriteString(c, badHeaderAnswers[rng.IntN(len(badHeaderAnswers))])
				case rawHugeHeaders:
					_, _ = io.WriteString(c, huge)
				case rawBadBody:
					_, _ = io.WriteString(c, badBody)
				case rawReset:
					if tc, ok := c.(*net.TCPConn); ok {
						_ = tc.SetLinger(0) // close sends RST
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// ---------------------------------------------------------------------------
// What herald acknowledged, and when subscriptions were live

// ackedEvent is one good event herald acknowledged.
type ackedEvent struct {
	id    string
	phase string
	// scheduled is when the load generator meant to publish it (open-loop,
	// so a stalled herald cannot hide its stall by slowing the sender);
	// start is when the request was sent. Latency runs from scheduled.
	scheduled, start time.Time
	// measured: a paced load event (latency samples); batch items are
	// checked for delivery only.
	measured bool
}

// subInfo is one subscription the test created.
type subInfo struct {
	id   string
	role string
	// checked: every event acknowledged while it was live must reach it.
	checked bool
	// created is when the create answered 201; events whose publish started
	// later are routed to it.
	created time.Time
	// deleting is when its delete was sent (zero: never). Only
	// subscriptions never deleted are checked for deliveries: a delete
	// cancels what is pending.
	deleting time.Time
}

// window is a span of deliberate disruption (a kill, a connection limit)
// during which publishes may fail without answer or with 503.
type window struct{ from, to time.Time }

// issues collects failures by kind, so a run with thousands of bad answers
// reports each kind once with a count and examples.
type issues struct {
	mu    sync.Mutex
	order []string
	count map[string]int
	ex    map[string][]string
}

const examplesPerIssue = 8

func (is *issues) add(kind, format string, args ...any) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.count == nil {
		is.count, is.ex = map[string]int{}, map[string][]string{}
	}
	if is.count[kind] == 0 {
		is.order = append(is.order, kind)
	}
	is.count[kind]++
	if len(is.ex[kind]) < examplesPerIssue {
		is.ex[kind] = append(is.ex[kind], fmt.Sprintf(format, args...))
	}
}

// report fails t once per kind.
func (is *issues) report(t *testing.T) {
	t.Helper()
	is.mu.Lock()
	defer is.mu.Unlock()
	for _, k := range is.order {
		t.Errorf("%s: %d time(s); e.g.\n  %s", k, is.count[k], strings.Join(is.ex[k], "\n  "))
	}
}

// ---------------------------------------------------------------------------
// Latency

// quantile returns the q-quantile (nearest rank) of ds; +Inf samples
// (never delivered) sort last.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s))*q+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// undelivered stands for a latency that never ended.
const undelivered = time.Duration(1<<63 - 1)

func fmtLatency(d time.Duration) string {
	if d == undelivered {
		return "never"
	}
	return d.Round(100 * time.Microsecond).String()
}

// ---------------------------------------------------------------------------
// PostgreSQL: a role whose connection slots the test can exhaust

// pgRole is a login role of its own for the node, with its schema. The
// test exhausts the ROLE's connection limit rather than the server's
// max_connections: the server is shared with every other PostgreSQL test
// running at the same time (CI runs packages in parallel, and the
// conformance suites open pools of their own), and taking all of its slots
// would fail them. For herald the refusal is the same: SQLSTATE 53300
// too_many_connections at connect time, from a server whose slots another
// client holds.
type pgRole struct {
	name string
	url  string // the node's database URL: this role, this schema
}

func newPGRole(t *testing.T, schema string) *pgRole {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, testdb.URL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "herald_chaos_" + hex.EncodeToString(b[:4])
	password := hex.EncodeToString(b[4:]) + "Pw"
	var db string
	require.NoError(t, admin.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	role, database := pgx.Identifier{name}.Sanitize(), pgx.Identifier{db}.Sanitize()
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN NOSUPERUSER PASSWORD '" + password + "'",
		// herald's Open runs CREATE SCHEMA IF NOT EXISTS, which checks the
		// privilege before it checks existence.
		"GRANT CONNECT, CREATE ON DATABASE " + database + " TO " + role,
		"ALTER SCHEMA " + pgx.Identifier{schema}.Sanitize() + " OWNER TO " + role,
	} {
		_, err := admin.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	// Runs before testdb's schema drop (cleanups run last in, first out):
	// hand the schema back, then drop the role.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, testdb.URL())
		if err != nil {
			t.Logf("drop role %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		for _, q := range []string{
			"ALTER ROLE " + role + " CONNECTION LIMIT -1",
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + name + "'",
			"REASSIGN OWNED BY " + role + " TO CURRENT_USER",
			"DROP OWNED BY " + role,
			"DROP ROLE " + role,
		} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Logf("cleanup of role %s: %s: %v", name, q, err)
			}
		}
	})
	u, err := url.Parse(testdb.URL())
	require.NoError(t, err)
	u.User = url.UserPassword(name, password)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return &pgRole{name: name, url: u.String()}
}

// heldSlots is the other client: connections of the role, holding every
// slot the role's limit allows.
type heldSlots struct {
	conns []*pgx.Conn
	pids  []uint32
}

// exhaust opens n connections as the role, lowers the role's limit to n
// (so every further connection is refused), and terminates the role's other
// backends: the node's pool loses its connections and cannot get new ones,
// as after a failover onto a server whose slots are taken. Without the
// terminate, the pool would keep its open connections and never meet the
// limit.
func (r *pgRole) exhaust(t *testing.T, ctx context.Context, n int) *heldSlots {
	t.Helper()
	h := &heldSlots{}
	for range n {
		c, err := pgx.Connect(ctx, r.url)
		require.NoError(t, err, "open a held connection")
		h.conns = append(h.conns, c)
		h.pids = append(h.pids, c.PgConn().PID())
	}
	admin, err := pgx.Connect(ctx, testdb.URL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", pgx.Identifier{r.name}.Sanitize(), n))
	require.NoError(t, err)
	pids := make([]int64, len(h.pids))
	for i, p := range h.pids {
		pids[i] = int64(p)
	}
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND NOT (pid = ANY($2))", r.name, pids)
	require.NoError(t, err)
	// The slots are really gone: one more connection is refused with
	// too_many_connections.
	probe, err := pgx.Connect(ctx, r.url)
	if err == nil {
		_ = probe.Close(ctx)
	}
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr) && pgErr.Code == "53300",
		"with %d slots held, a new connection must be refused with 53300; got %v", n, err)
	return h
}

// release closes the held connections and lifts the limit.
func (r *pgRole) release(t *testing.T, ctx context.Context, h *heldSlots) {
	t.Helper()
	admin, err := pgx.Connect(ctx, testdb.URL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "ALTER ROLE "+pgx.Identifier{r.name}.Sanitize()+" CONNECTION LIMIT -1")
	require.NoError(t, err)
	for _, c := range h.conns {
		_ = c.Close(ctx)
	}
}

// ---------------------------------------------------------------------------
// HTTP

// rawJSON is a request body sent byte for byte (invalid UTF-8 included).
type rawJSON []byte

// chaosClient calls herald's API with a bounded timeout.
type chaosClient struct {
	addr, token string
	http        *http.Client
	transport   *http.Transport
}

func newChaosClient(addr, token string) *chaosClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	return &chaosClient{addr: addr, token: token, transport: tr, http: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
}

// call sends body (JSON-encoded unless rawJSON) and returns the status and
// the answer.
func (c *chaosClient) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case rawJSON:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// listDeliveries pages through GET /v1/deliveries with the given query.
func (c *chaosClient) listDeliveries(ctx context.Context, query string) ([]deliveryItem, error) {
	var all []deliveryItem
	cursor := ""
	for {
		q := query + "&limit=1000"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		code, body, err := c.call(ctx, http.MethodGet, "/v1/deliveries?"+q, nil)
		if err != nil {
			return nil, err
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("GET /v1/deliveries?%s: %d %s", q, code, body)
		}
		var page struct {
			Data       []deliveryItem `json:"data"`
			NextCursor *string        `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if page.NextCursor == nil || *page.NextCursor == "" || len(all) > 200000 {
			return all, nil
		}
		cursor = *page.NextCursor
	}
}

type deliveryItem struct {
	ID               string  `json:"id"`
	EventID          string  `json:"event_id"`
	SubscriptionID   string  `json:"subscription_id"`
	State            string  `json:"state"`
	Tier             int     `json:"tier"`
	AttemptCount     int     `json:"attempt_count"`
	NextAttemptAt    *string `json:"next_attempt_at"`
	LastStatus       int     `json:"last_status"`
	LastError        string  `json:"last_error"`
	LastErrorMessage string  `json:"last_error_message"`
	Attempts         []struct {
		N            int    `json:"n"`
		Error        string `json:"error"`
		ErrorMessage string `json:"error_message"`
	} `json:"attempts"`
}

type statsView struct {
	Tiers []struct {
		Tier     int   `json:"tier"`
		Pending  int64 `json:"pending"`
		InFlight int64 `json:"in_flight"`
		Due      int64 `json:"due"`
	} `json:"tiers"`
	Dead      int64 `json:"dead"`
	Throttled int64 `json:"throttled"`
}
