package main

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testcert"
	"github.com/heraldhq/herald/internal/testdb"
)

// The chaos test's shape. Rates and sizes are small enough for a 2-core CI
// machine under -race, large enough that every hostile path is taken many
// times while the healthy subscriptions' latency is sampled ~700 times per
// phase.
const (
	chaosToken = "chaos-token"
	// chaosRate good events per second from chaosPublishers concurrent
	// clients, paced open-loop (a stalled herald cannot slow the schedule).
	chaosRate       = 40
	chaosPublishers = 8
	// One good event in hostileEvery has type chaos.h.tick, the only type
	// hostile receivers subscribe to: enough traffic to keep every retry
	// tier busy (2.5 events/s per hostile receiver, up to 4 attempts each)
	// while the extra work stays small beside the healthy deliveries, so
	// the latency comparison measures isolation, not the machine's
	// capacity.
	hostileEvery   = 16
	baselineEvents = 240 // 6 s
	hostileEvents  = 320 // 8 s
	// tiersFull is the first configuration; hostile deliveries wait 3 s in
	// its last tier, so a kill always finds some there. tiersFew is the
	// restart's: tiers 2 and 3 no longer exist.
	tiersFull = "0s,100ms,300ms,3s"
	tiersFew  = "0s,300ms"
	// chaosTimeoutMS is every subscription's timeout: it also sizes the
	// leases a kill leaves behind (timeout + --lease-margin).
	chaosTimeoutMS = 2000
	// Deadlines for async work (polled, never slept).
	phaseDrainDeadline = 15 * time.Second
	finalDeadline      = 30 * time.Second
)

// staticRoles are the healthy subscriptions that live from start to end;
// their publish→delivery latency is compared between the baseline and the
// hostile phase.
var staticRoles = []string{"plain", "cel", "fifo"}

// TestChaos is issue 10's chaos test, on the real binary and both stores,
// through the public HTTP API only. Under one load of good publishes it
// mixes hostile receivers (a NUL in the TLS error text, NUL and invalid
// UTF-8 in status lines, headers and bodies, headers beyond the limit,
// unknown CA, resets, 429 with Retry-After, 410), hostile publishes (NUL
// keys, invalid UTF-8, alone and inside batches; an exponential JMESPath
// filter; a NUL in a description), subscription deletes and re-creates, a
// kill -9 with deliveries queued in the last tiers followed by a restart
// with fewer tiers, PostgreSQL at its connection limit and then released,
// and a second kill -9 mid-load. At the end:
//   - every event herald acknowledged reached every healthy subscription
//     that was live when it was published and stayed live;
//   - nothing is pending or in flight (every delivery was claimable: the
//     hostile receivers fail for a bounded number of tiers, the 429/410
//     receivers recover and the disabled subscription is re-enabled), and
//     /v1/stats agrees with the delivery list;
//   - no hostile publish was accepted or answered 5xx, no good publish
//     outside a disruption failed, and no stored error text holds a NUL;
//   - the healthy subscriptions' p99 latency under hostility stayed within
//     2× of the baseline measured by the same test just before.
//
// The seed of every random choice is logged; HERALD_CHAOS_SEED replays it.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary under a minute of load per store")
	}
	// Not parallel, and the stores run one after the other: the latency
	// comparison is only meaningful with as little CPU competition as this
	// package can arrange.
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("HERALD_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "HERALD_CHAOS_SEED")
		seed = v
	}
	t.Logf("chaos seed %d (replay with HERALD_CHAOS_SEED=%d)", seed, seed)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			start := time.Now()
			runChaos(t, backend, seed)
			t.Logf("%s: chaos run took %s", backend, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// chaos is one store's run.
type chaos struct {
	t       *testing.T
	backend string
	bin     string
	addr    string
	store   []string // --data-dir or --database-url
	role    *pgRole  // postgres only
	rng     *lockedRand
	cl      *chaosClient
	rec     *recorder
	node    *chaosNode
	logs    *syncBuffer // every node's output, across restarts
	is      issues
	// hostile: the 429 and 410 receivers misbehave while set.
	hostile atomic.Bool
	phase   atomic.Value // string: the phase new publishes belong to

	urls struct{ healthy, tlsNUL, tlsCA, raw, gone, tooMany string }

	mu       sync.Mutex
	acked    map[string]*ackedEvent
	subs     map[string]*subInfo
	byRole   map[string]*subInfo // static and hostile subscriptions
	windows  []window
	churn    []*subInfo // the churn slots' current subscriptions (nil: none)
	acks     atomic.Int64
	excused  atomic.Int64 // failed publishes inside disruption windows
	hostileN atomic.Int64 // hostile requests sent
}

func runChaos(t *testing.T, backend string, seed uint64) {
	ctx := context.Background()
	c := &chaos{
		t: t, backend: backend, bin: heraldBinary(t), addr: freeAddr(t),
		rng:    &lockedRand{r: mrand.New(mrand.NewPCG(seed, uint64(len(backend))))},
		rec:    newRecorder(),
		logs:   &syncBuffer{},
		acked:  map[string]*ackedEvent{},
		subs:   map[string]*subInfo{},
		byRole: map[string]*subInfo{},
	}
	c.phase.Store("setup")
	c.cl = newChaosClient(c.addr, chaosToken)
	defer c.is.report(t)
	if backend == "postgres" {
		schema := testdb.PostgresSchema(t)
		c.role = newPGRole(t, schema)
		c.store = []string{"--database-url", c.role.url}
	} else {
		c.store = []string{"--data-dir", t.TempDir()}
	}
	c.startReceivers()
	c.node = startChaosNode(t, c.bin, c.addr, c.logs, c.args(tiersFull))

	for _, role := range staticRoles {
		body := c.subBody("/"+role, "chaos.*")
		switch role {
		case "cel":
			body["filter"] = map[string]any{"cel": "data.n >= 0"}
		case "fifo":
			body["ordering"] = "fifo"
		}
		c.mustCreate(ctx, role, true, body)
	}

	// 1. Baseline: the same load, no hostility.
	c.phase.Store("base")
	c.startLoad("base", baselineEvents).wait()
	base := c.phaseLatencies("base")

	// 2. Hostility, latency measured.
	c.hostile.Store(true)
	hostileSubs := map[string]string{
		"tls-nul":        c.urls.tlsNUL,
		"tls-unknown-ca": c.urls.tlsCA,
		"bad-headers":    c.urls.raw + rawBadHeaders,
		"huge-headers":   c.urls.raw + rawHugeHeaders,
		"bad-body":       c.urls.raw + rawBadBody,
		"reset":          c.urls.raw + rawReset,
		"retry-after":    c.urls.tooMany,
		"gone":           c.urls.gone,
	}
	roles := make([]string, 0, len(hostileSubs))
	for role := range hostileSubs {
		roles = append(roles, role)
	}
	sort.Strings(roles)
	for _, role := range roles {
		body := c.subBody("", "chaos.h.*")
		body["url"] = hostileSubs[role]
		c.mustCreate(ctx, role, false, body)
	}
	c.churn = make([]*subInfo, 2)
	for i := range c.churn {
		c.churn[i] = c.mustCreate(ctx, "churn", true, c.subBody("/churn", "chaos.*"))
	}
	c.phase.Store("hostile")
	stopHostility := c.startHostility(ctx)
	load := c.startLoad("hostile", hostileEvents)
	c.waitAcks(40, "hostile")
	c.probeExponentialFilter(ctx)
	load.wait()
	hostile := c.phaseLatencies("hostile")
	c.compareLatency(base, hostile)

	// 3. Disruptions, under the same hostility: kill -9 with retries queued
	// in the last tiers, restart with fewer tiers, PostgreSQL at its
	// connection limit, kill -9 again mid-load.
	c.phase.Store("disrupt")
	load = c.startLoad("disrupt", 0)
	c.waitLastTiers(ctx)
	c.restart(tiersFew)
	c.waitAcks(40, "after the restart with fewer tiers")
	if c.role != nil {
		c.connectionLimit(ctx)
	}
	c.restart(tiersFew)
	c.waitAcks(40, "after the second kill -9")
	load.halt()
	stopHostility()

	// 4. The hostile receivers that can recover do; the subscription the
	// 410 disabled is re-enabled, so its pending deliveries are claimable.
	c.hostile.Store(false)
	c.reenable(ctx, c.byRole["gone"])
	c.finalCheck(ctx, len(strings.Split(tiersFew, ",")))
	c.checkStoredErrorTexts(ctx)
	c.summary()
}

// args are the node's flags with the given tiers.
func (c *chaos) args(tiers string) []string {
	return append([]string{"--dev", "--api-token", chaosToken, "--tiers", tiers,
		"--lease-margin", "1s", "--poll-interval", "100ms", "--shutdown-timeout", "1s"}, c.store...)
}

// subBody is a subscription to the healthy receiver at path (or, with an
// empty path, a body whose url the caller sets).
func (c *chaos) subBody(path, eventTypes string) map[string]any {
	return map[string]any{"url": c.urls.healthy + path, "event_types": []string{eventTypes}, "timeout_ms": chaosTimeoutMS}
}

func (c *chaos) startReceivers() {
	t := c.t
	healthy := httptest.NewServer(c.rec)
	t.Cleanup(healthy.Close)
	c.urls.healthy = healthy.URL
	nulCert := testcert.NULName(t)
	nul := quietTLSServer(t, c.rec, &nulCert)
	c.urls.tlsNUL = "https://localhost:" + strconv.Itoa(nul.Listener.Addr().(*net.TCPAddr).Port) + "/"
	c.urls.tlsCA = quietTLSServer(t, c.rec, nil).URL // httptest's CA is not trusted by herald
	c.urls.raw = startRawServer(t, c.rng)
	tooMany := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.hostile.Load() {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		c.rec.ServeHTTP(w, r)
	}))
	t.Cleanup(tooMany.Close)
	c.urls.tooMany = tooMany.URL
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.hostile.Load() {
			w.WriteHeader(http.StatusGone)
			return
		}
		c.rec.ServeHTTP(w, r)
	}))
	t.Cleanup(gone.Close)
	c.urls.gone = gone.URL
}

// ---------------------------------------------------------------------------
// Subscriptions

func (c *chaos) createSub(ctx context.Context, role string, checked bool, body any) (*subInfo, int, []byte, error) {
	code, out, err := c.cl.call(ctx, http.MethodPost, "/v1/subscriptions", body)
	if err != nil || code != http.StatusCreated {
		return nil, code, out, err
	}
	var res struct{ ID string }
	if err := json.Unmarshal(out, &res); err != nil || res.ID == "" {
		return nil, code, out, fmt.Errorf("create answered 201 without an id: %s", out)
	}
	info := &subInfo{id: res.ID, role: role, checked: checked, created: time.Now()}
	c.mu.Lock()
	c.subs[info.id] = info
	c.mu.Unlock()
	return info, code, out, nil
}

func (c *chaos) mustCreate(ctx context.Context, role string, checked bool, body any) *subInfo {
	c.t.Helper()
	info, code, out, err := c.createSub(ctx, role, checked, body)
	require.NoError(c.t, err)
	require.Equal(c.t, http.StatusCreated, code, "create %s subscription: %s", role, out)
	c.mu.Lock()
	if role != "churn" {
		c.byRole[role] = info
	}
	c.mu.Unlock()
	return info
}

// deleteSub deletes s; from the moment the request is sent, s is no longer
// checked for deliveries (the delete cancels what is pending).
func (c *chaos) deleteSub(ctx context.Context, s *subInfo) {
	start := time.Now()
	c.mu.Lock()
	s.deleting = start
	c.mu.Unlock()
	code, out, err := c.cl.call(ctx, http.MethodDelete, "/v1/subscriptions/"+s.id, nil)
	if err == nil && (code == http.StatusNoContent || code == http.StatusNotFound) {
		return
	}
	c.failed("subscription delete", s.id, start, code, out, err)
}

func (c *chaos) reenable(ctx context.Context, s *subInfo) {
	var last string
	ok := poll(20*time.Second, 100*time.Millisecond, func() (bool, string) {
		code, out, err := c.cl.call(ctx, http.MethodPatch, "/v1/subscriptions/"+s.id, map[string]any{"state": "enabled"})
		last = fmt.Sprintf("%d %s %v", code, out, err)
		return err == nil && code == http.StatusOK, last
	})
	if !ok {
		c.is.add("re-enabling the 410 subscription failed", "PATCH %s state=enabled: %s", s.id, last)
	}
}

// ---------------------------------------------------------------------------
// Disruption windows

func (c *chaos) beginWindow() {
	c.mu.Lock()
	c.windows = append(c.windows, window{from: time.Now()})
	c.mu.Unlock()
}

func (c *chaos) endWindow() {
	c.mu.Lock()
	c.windows[len(c.windows)-1].to = time.Now()
	c.mu.Unlock()
}

// disrupted reports whether [start, now] overlaps a disruption window.
func (c *chaos) disrupted(start time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.windows {
		if w.to.IsZero() || !w.to.Before(start) {
			return true
		}
	}
	return false
}

// failed records a request that should have succeeded. Inside a disruption
// window (a kill, the connection limit) no answer and 503 are excused;
// anything else, and every 500, is an issue.
func (c *chaos) failed(what, id string, start time.Time, code int, body []byte, err error) {
	body = []byte(strings.TrimSpace(string(body)))
	if c.disrupted(start) && (err != nil || code == http.StatusServiceUnavailable) {
		c.excused.Add(1)
		return
	}
	switch {
	case err != nil:
		c.is.add(what+" failed without an answer outside a disruption window", "%s (%s): %v", id, c.phase.Load(), err)
	case code >= 500:
		c.is.add(what+" answered 5xx (must be 2xx; only 503 inside a disruption window)", "%s (%s): %d %s", id, c.phase.Load(), code, body)
	default:
		c.is.add(what+" refused", "%s (%s): %d %s", id, c.phase.Load(), code, body)
	}
}

// restart kills the node with SIGKILL and starts it on the same data with
// the given tiers.
func (c *chaos) restart(tiers string) {
	c.beginWindow()
	c.node.kill9(c.t)
	c.node = startChaosNode(c.t, c.bin, c.addr, c.logs, c.args(tiers))
	c.cl.transport.CloseIdleConnections()
	c.endWindow()
	c.t.Logf("kill -9 and restart with --tiers %s", tiers)
}

// ---------------------------------------------------------------------------
// Load

type chaosLoad struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// startLoad publishes total good events (0: until halted) at chaosRate.
func (c *chaos) startLoad(phase string, total int) *chaosLoad {
	type job struct {
		n  int
		at time.Time
	}
	l := &chaosLoad{stop: make(chan struct{}), done: make(chan struct{})}
	jobs := make(chan job, 4096)
	var wg sync.WaitGroup
	for range chaosPublishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				c.publishGood(phase, j.n, j.at)
			}
		}()
	}
	go func() {
		defer func() { close(jobs); wg.Wait(); close(l.done) }()
		tick := time.NewTicker(time.Second / chaosRate)
		defer tick.Stop()
		for n := 0; total <= 0 || n < total; n++ {
			select {
			case <-l.stop:
				return
			case at := <-tick.C:
				select {
				case jobs <- job{n, at}:
				case <-l.stop:
					return
				}
			}
		}
	}()
	// A fatal failure elsewhere must not leave publishers running into the
	// next subtest.
	c.t.Cleanup(l.halt)
	return l
}

func (l *chaosLoad) wait() { <-l.done }
func (l *chaosLoad) halt() { l.stopOnce.Do(func() { close(l.stop) }); <-l.done }

// eventPad makes a good event about 200 bytes, the size issue 10 measured
// the exponential filter with.
var eventPad = strings.Repeat("x", 150)

func (c *chaos) publishGood(phase string, n int, scheduled time.Time) {
	id := fmt.Sprintf("%s-%s-%05d", c.backend, phase, n)
	typ := "chaos.ok"
	if n%hostileEvery == 0 {
		typ = "chaos.h.tick"
	}
	body := map[string]any{"id": id, "type": typ, "key": fmt.Sprintf("k%d", n%8),
		"data": map[string]any{"n": n, "pad": eventPad}}
	start := time.Now()
	code, out, err := c.cl.call(context.Background(), http.MethodPost, "/v1/events", body)
	if err == nil && code == http.StatusAccepted {
		c.ack(&ackedEvent{id: id, phase: phase, scheduled: scheduled, start: start, measured: true})
		return
	}
	c.failed("good publish", id, start, code, out, err)
}

func (c *chaos) ack(ev *ackedEvent) {
	c.mu.Lock()
	c.acked[ev.id] = ev
	c.mu.Unlock()
	c.acks.Add(1)
}

// waitAcks waits (deadline phaseDrainDeadline) until n more publishes were acknowledged,
// so the next disruption lands mid-load.
func (c *chaos) waitAcks(n int64, what string) {
	from := c.acks.Load()
	if !poll(phaseDrainDeadline, 10*time.Millisecond, func() (bool, string) { return c.acks.Load() >= from+n, "" }) {
		c.is.add("publishes stopped being acknowledged", "%s: fewer than %d of the load's publishes acknowledged in %s; logs:\n%s",
			what, n, phaseDrainDeadline, c.logs.Tail(4<<10))
	}
}

// ---------------------------------------------------------------------------
// Hostility

// startHostility runs the hostile publisher and the subscription churner
// until the returned stop is called.
func (c *chaos) startHostility(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(120 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
				c.hostilePublish(ctx, i)
			}
		}
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				c.churnOnce(ctx)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	c.t.Cleanup(stop)
	return stop
}

// Hostile event bodies. Raw bytes: json.Marshal would replace the invalid
// UTF-8 with U+FFFD before herald saw it.
var (
	nulKeyEvent      = `{"type":"chaos.bad","key":"k\u0000ey","data":{"n":-1}}`
	latin1DataEvent  = "{\"type\":\"chaos.bad\",\"data\":{\"s\":\"caf\xe9 cr\xe8me \xff\xfe\"}}"
	invalidKeyEvent  = "{\"type\":\"chaos.bad\",\"key\":\"k\xff\xfeey\",\"data\":{}}"
	hostileVariants  = 6
	hostileBatchSize = 5 // good items around the bad one at index 2
)

// hostilePublish sends the i-th hostile request: each must be refused with
// 4xx, never 5xx, and must not disturb anything else.
func (c *chaos) hostilePublish(ctx context.Context, i int) {
	c.hostileN.Add(1)
	start := time.Now()
	switch i % hostileVariants {
	case 0, 1, 2:
		body := []string{nulKeyEvent, latin1DataEvent, invalidKeyEvent}[i%hostileVariants]
		name := []string{"event with a NUL in key", "event with Latin-1 bytes in data", "event with invalid UTF-8 in key"}[i%hostileVariants]
		code, out, err := c.cl.call(ctx, http.MethodPost, "/v1/events", rawJSON(body))
		c.expect4xx(name, start, code, out, err)
	case 3, 4:
		c.hostileBatch(ctx, i, start)
	case 5:
		body := c.subBody("/desc", "chaos.*")
		body["description"] = "bad\x00description"
		info, code, out, err := c.createSub(ctx, "nul-description", false, body)
		if info != nil {
			c.is.add("subscription with a NUL in description accepted (must be 4xx)", "%s", info.id)
			c.deleteSub(ctx, info)
			return
		}
		c.expect4xx("subscription with a NUL in description", start, code, out, err)
	}
}

func (c *chaos) expect4xx(what string, start time.Time, code int, out []byte, err error) {
	out = []byte(strings.TrimSpace(string(out)))
	switch {
	case err == nil && code >= 400 && code < 500:
	case err == nil && code >= 200 && code < 300:
		c.is.add("hostile request accepted (must be 4xx): "+what, "%d %s", code, out)
	default:
		if c.disrupted(start) && (err != nil || code == http.StatusServiceUnavailable) {
			c.excused.Add(1)
			return
		}
		if err != nil {
			c.is.add("hostile request not answered 4xx: "+what, "no answer: %v", err)
			return
		}
		c.is.add("hostile request not answered 4xx: "+what, "%d %s", code, out)
	}
}

// hostileBatch publishes a batch of good events with one bad item in the
// middle. Docs: "One bad item is rejected alone; the others are stored."
// The item with a NUL key must be rejected alone. A body with raw invalid
// UTF-8 is not JSON text at all (RFC 8259 requires UTF-8), so refusing that
// whole batch with 400 — like any malformed body — is also accepted; what
// is never accepted is a 5xx or the bad item stored.
func (c *chaos) hostileBatch(ctx context.Context, i int, start time.Time) {
	bad, name := nulKeyEvent, "NUL key"
	if i%hostileVariants == 4 {
		bad, name = latin1DataEvent, "Latin-1 data"
	}
	phase := c.phase.Load().(string)
	ids := make([]string, hostileBatchSize)
	items := make([]string, hostileBatchSize)
	for j := range items {
		if j == 2 {
			items[j] = bad
			continue
		}
		ids[j] = fmt.Sprintf("%s-%s-batch-%04d-%d", c.backend, phase, i, j)
		item, _ := json.Marshal(map[string]any{"id": ids[j], "type": "chaos.ok", "key": "kb",
			"data": map[string]any{"n": 100000 + i*10 + j, "pad": eventPad}})
		items[j] = string(item)
	}
	body := `{"events":[` + strings.Join(items, ",") + `]}`
	code, out, err := c.cl.call(ctx, http.MethodPost, "/v1/events/batch", rawJSON(body))
	what := "batch with one bad item (" + name + ")"
	if err == nil && code == http.StatusBadRequest && i%hostileVariants == 4 {
		return
	}
	if err != nil || code != http.StatusOK {
		c.failed(what, ids[0], start, code, out, err)
		return
	}
	var res struct {
		Results []struct {
			Index  int    `json:"index"`
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"results"`
	}
	if json.Unmarshal(out, &res) != nil || len(res.Results) != hostileBatchSize {
		c.is.add(what+": malformed answer", "%s", out)
		return
	}
	for j, r := range res.Results {
		switch {
		case j == 2 && r.Status != "rejected":
			c.is.add(what+": the bad item was not rejected", "%s: item 2 %q (id %q)", ids[0], r.Status, r.ID)
		case j != 2 && r.Status != "accepted":
			c.is.add(what+": a good item was not accepted", "%s: %q", ids[j], r.Status)
		case j != 2:
			c.ack(&ackedEvent{id: ids[j], phase: phase, scheduled: start, start: start})
		}
	}
}

// churnOnce deletes one churn subscription and creates its replacement.
func (c *chaos) churnOnce(ctx context.Context) {
	slot := c.rng.IntN(len(c.churn))
	if old := c.churn[slot]; old != nil {
		c.deleteSub(ctx, old)
	}
	start := time.Now()
	info, code, out, err := c.createSub(ctx, "churn", true, c.subBody("/churn", "chaos.*"))
	c.churn[slot] = info
	if info == nil {
		c.failed("churn subscription create", "slot "+strconv.Itoa(slot), start, code, out, err)
	}
}

// probeExponentialFilter creates a subscription whose JMESPath filter's
// cost doubles per step (issue 10 item 9: 3.9 s per 200-byte event at 22
// steps). Refusing it (4xx) is fine; accepting it is fine only if a publish
// stays fast. An accepted, slow one is deleted again so the rest of the run
// still means something.
func (c *chaos) probeExponentialFilter(ctx context.Context) {
	expr := "[data]" + strings.Repeat(".[@,@][]", 22)
	body := c.subBody("/exp", "chaos.*")
	body["filter"] = map[string]any{"jmespath": expr}
	info, code, out, err := c.createSub(ctx, "exp-filter", false, body)
	switch {
	case err != nil:
		c.is.add("exponential JMESPath filter: create failed", "%d %s %v", code, out, err)
		return
	case info == nil && code >= 400 && code < 500:
		c.t.Logf("exponential JMESPath filter refused: %d %s", code, out)
		return
	case info == nil:
		c.is.add("exponential JMESPath filter: create answered neither 201 nor 4xx", "%d %s", code, out)
		return
	}
	id := c.backend + "-exp-probe"
	start := time.Now()
	pcode, pout, perr := c.cl.call(ctx, http.MethodPost, "/v1/events", map[string]any{"id": id, "type": "chaos.ok",
		"data": map[string]any{"n": 0, "pad": eventPad}})
	took := time.Since(start)
	if perr == nil && pcode == http.StatusAccepted {
		c.ack(&ackedEvent{id: id, phase: "hostile", scheduled: start, start: start})
	}
	// 1 s: a 200-byte event commits in milliseconds; issue 10 measured
	// 3.9 s with this filter.
	if perr != nil || pcode != http.StatusAccepted || took > time.Second {
		c.is.add("exponential JMESPath filter accepted and it stalls publishes",
			"subscription %s: a 200-byte event took %s to publish (%d %s %v)", info.id, took.Round(time.Millisecond), pcode, pout, perr)
		c.deleteSub(ctx, info)
		return
	}
	c.t.Logf("exponential JMESPath filter accepted (%s); a publish took %s", info.id, took.Round(time.Millisecond))
}

// ---------------------------------------------------------------------------
// Disruptions

// waitLastTiers waits until some deliveries are pending in tier 2 or 3, the
// tiers the restart removes; without them the restart would prove nothing.
func (c *chaos) waitLastTiers(ctx context.Context) {
	var last string
	ok := poll(15*time.Second, 100*time.Millisecond, func() (bool, string) {
		pend, err := c.cl.listDeliveries(ctx, "state=pending")
		if err != nil {
			last = err.Error()
			return false, last
		}
		byTier := map[int]int{}
		for _, d := range pend {
			byTier[d.Tier]++
		}
		last = fmt.Sprintf("pending by tier: %v", byTier)
		return byTier[2]+byTier[3] > 0, last
	})
	if !ok {
		c.is.add("no delivery reached tier 2 or 3 before the restart with fewer tiers",
			"after 15 s of failing receivers (%s): failures are not moving through the tiers; logs:\n%s", last, c.logs.Tail(4<<10))
		return
	}
	c.t.Logf("before the kill: %s", last)
}

// connectionLimit holds every connection slot of the node's role for a few
// seconds while the load runs, then releases them; herald must answer 503
// (or nothing) meanwhile and recover by itself.
func (c *chaos) connectionLimit(ctx context.Context) {
	c.beginWindow()
	excused := c.excused.Load()
	h := c.role.exhaust(c.t, ctx, 2)
	// The outage's length, not a wait for async work: publishes keep
	// arriving throughout.
	time.Sleep(3 * time.Second)
	c.role.release(c.t, ctx, h)
	acks := c.acks.Load()
	ok := poll(30*time.Second, 10*time.Millisecond, func() (bool, string) { return c.acks.Load() >= acks+10, "" })
	c.endWindow()
	c.t.Logf("connection limit: %d requests refused or unanswered while the slots were held", c.excused.Load()-excused)
	if !ok {
		c.is.add("herald did not recover after the connection slots were released",
			"no publish acknowledged within 30 s of the release; logs:\n%s", c.logs.Tail(4<<10))
	}
}

// ---------------------------------------------------------------------------
// Invariants

// phaseLatencies waits (deadline phaseDrainDeadline) until every acknowledged paced event
// of phase reached every static subscription, and returns the
// publish→delivery latencies (undelivered for those that never arrived).
func (c *chaos) phaseLatencies(phase string) []time.Duration {
	var samples []time.Duration
	byRole := map[string][]time.Duration{}
	// worst: the slowest deliveries, with when they were scheduled, to tell
	// one stall from a slow phase.
	type slow struct {
		role, event string
		at          time.Time
		d           time.Duration
	}
	var worst []slow
	missing := 0
	var phaseStart time.Time
	collect := func() (bool, string) {
		samples, missing, worst = samples[:0], 0, worst[:0]
		clear(byRole)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, ev := range c.acked {
			if ev.phase != phase || !ev.measured {
				continue
			}
			if phaseStart.IsZero() || ev.scheduled.Before(phaseStart) {
				phaseStart = ev.scheduled
			}
			for _, role := range staticRoles {
				d := undelivered
				if at, ok := c.rec.arrival(c.byRole[role].id, ev.id); ok {
					d = at.Sub(ev.scheduled)
				} else {
					missing++
				}
				if role != "fifo" {
					// The latency bound is on the unordered subscriptions:
					// fifo's latency is its key's round trip times the
					// queue per key, which CPU contention alone (another
					// package's tests on the same 2 cores) stretches on
					// PostgreSQL from ~0.4 s to ~2 s p99 whether or not
					// hostility runs. Its deliveries are still required
					// (missing), and its p50/p99 are logged per role.
					samples = append(samples, d)
				}
				byRole[role] = append(byRole[role], d)
				worst = append(worst, slow{role, ev.id, ev.scheduled, d})
			}
		}
		return missing == 0, ""
	}
	if !poll(phaseDrainDeadline, 50*time.Millisecond, collect) {
		c.is.add("healthy deliveries of a phase did not arrive in time",
			"phase %s: %d of %d (event, static subscription) deliveries missing after %s; logs:\n%s",
			phase, missing, len(samples), phaseDrainDeadline, c.logs.Tail(4<<10))
	}
	var per []string
	for _, role := range staticRoles {
		per = append(per, fmt.Sprintf("%s p50 %s p99 %s", role, fmtLatency(quantile(byRole[role], 0.5)), fmtLatency(quantile(byRole[role], 0.99))))
	}
	sort.Slice(worst, func(i, j int) bool { return worst[i].d > worst[j].d })
	var slowest []string
	for _, w := range worst[:min(len(worst), 5)] {
		slowest = append(slowest, fmt.Sprintf("%s %s at +%s: %s", w.role, w.event, w.at.Sub(phaseStart).Round(time.Millisecond), fmtLatency(w.d)))
	}
	c.t.Logf("phase %s: %d latency samples, p50 %s, p99 %s, max %s (%s); slowest: %s", phase, len(samples),
		fmtLatency(quantile(samples, 0.5)), fmtLatency(quantile(samples, 0.99)), fmtLatency(quantile(samples, 1)),
		strings.Join(per, ", "), strings.Join(slowest, "; "))
	return samples
}

// compareLatency: the healthy unordered subscriptions' p99 under hostility
// (phaseLatencies leaves fifo out of the samples) must stay
// within max(2×baseline, baseline+500ms). The floor: on a 2-core machine
// shared with other test binaries, a baseline p99 of a few tens of
// milliseconds doubles from scheduler noise alone (one GC pause of the
// -race test process, one fsync behind another package's test; a SQLite run
// beside the delivery package's tests saw 25 ms → 248 ms with every
// isolation fix in place, one 300 ms stall of all subscriptions at once).
// 500 ms is still far below what each isolation failure issue 10 describes costs (a
// stuck completer: never; an exponential filter: seconds per publish;
// retries weighted by unclaimable work: 7 s).
func (c *chaos) compareLatency(base, hostile []time.Duration) {
	b, h := quantile(base, 0.99), quantile(hostile, 0.99)
	if b == undelivered {
		c.is.add("baseline p99 undefined", "baseline deliveries missing")
		return
	}
	bound := max(2*b, b+500*time.Millisecond)
	if h > bound {
		c.is.add("healthy subscriptions' p99 latency under hostility exceeds max(2×baseline, baseline+500ms)",
			"baseline p99 %s, hostile p99 %s, bound %s (p50 %s → %s)", fmtLatency(b), fmtLatency(h), fmtLatency(bound),
			fmtLatency(quantile(base, 0.5)), fmtLatency(quantile(hostile, 0.5)))
	}
}

// finalCheck waits (deadline finalDeadline) until every invariant holds, and
// reports, precisely, each one that still does not.
func (c *chaos) finalCheck(ctx context.Context, tiers int) {
	var problems []string
	ok := poll(finalDeadline, 250*time.Millisecond, func() (bool, string) {
		problems = c.finalProblems(ctx, tiers, false)
		return len(problems) == 0, ""
	})
	if ok {
		return
	}
	for _, p := range c.finalProblems(ctx, tiers, true) {
		c.t.Errorf("after %s of draining: %s", finalDeadline, p)
	}
	c.t.Logf("node logs (tail):\n%s", c.logs.Tail(8<<10))
}

func (c *chaos) finalProblems(ctx context.Context, tiers int, detail bool) []string {
	var problems []string
	// 1. Every acknowledged event reached every checked subscription that
	// was live when it was published and was never deleted.
	c.mu.Lock()
	type miss struct {
		sub    *subInfo
		events []string
		want   int
	}
	var misses []miss
	for _, s := range c.subs {
		if !s.checked || !s.deleting.IsZero() {
			continue
		}
		m := miss{sub: s}
		for _, ev := range c.acked {
			if !ev.start.After(s.created) {
				continue
			}
			m.want++
			if _, ok := c.rec.arrival(s.id, ev.id); !ok {
				m.events = append(m.events, ev.id)
			}
		}
		if len(m.events) > 0 {
			misses = append(misses, m)
		}
	}
	c.mu.Unlock()
	for _, m := range misses {
		sort.Strings(m.events)
		p := fmt.Sprintf("subscription %s (%s, live since %s): %d of %d acknowledged events never arrived: %s",
			m.sub.id, m.sub.role, m.sub.created.Format("15:04:05.000"), len(m.events), m.want, firstN(m.events, 10))
		if detail {
			for _, ev := range m.events[:min(len(m.events), 5)] {
				p += "\n    " + c.describeDelivery(ctx, ev, m.sub.id)
			}
		}
		problems = append(problems, p)
	}

	// 2. Nothing pending or in flight: every delivery was claimable.
	for _, state := range []string{"pending", "in_flight"} {
		list, err := c.cl.listDeliveries(ctx, "state="+state)
		if err != nil {
			problems = append(problems, "listing "+state+" deliveries: "+err.Error())
			continue
		}
		// Grouped by what the subscription is (role, deleted or not) and
		// tier, so a thousand stranded deliveries read as one line.
		type group struct {
			kind string
			tier int
		}
		groups := map[group][]deliveryItem{}
		var keys []group
		for _, d := range list {
			g := group{c.subKind(d.SubscriptionID), d.Tier}
			if groups[g] == nil {
				keys = append(keys, g)
			}
			groups[g] = append(groups[g], d)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].kind != keys[j].kind {
				return keys[i].kind < keys[j].kind
			}
			return keys[i].tier < keys[j].tier
		})
		for _, g := range keys {
			ds := groups[g]
			where := fmt.Sprintf("tier %d", g.tier)
			if g.tier >= tiers {
				where += fmt.Sprintf(" (a tier that no longer exists: --tiers %s has %d)", tiersFew, tiers)
			}
			subs := map[string]bool{}
			var subIDs []string
			for _, d := range ds {
				if !subs[d.SubscriptionID] {
					subs[d.SubscriptionID] = true
					subIDs = append(subIDs, d.SubscriptionID)
				}
			}
			ex := ds[0]
			next := "null"
			if ex.NextAttemptAt != nil {
				next = *ex.NextAttemptAt
			}
			problems = append(problems, fmt.Sprintf("%d deliveries still %s in %s, of %d %s subscription(s) [%s]; e.g. %s (subscription %s, event %s, %d attempts, last error %s %q, next_attempt_at %s)",
				len(ds), state, where, len(subIDs), g.kind, firstN(subIDs, 3), ex.ID, ex.SubscriptionID, ex.EventID, ex.AttemptCount, ex.LastError, ex.LastErrorMessage, next))
		}
	}

	// 3. /v1/stats agrees: no pending, due or in-flight work in any tier
	// it reports (it must not hide a tier's work either: see 2).
	code, body, err := c.cl.call(ctx, http.MethodGet, "/v1/stats", nil)
	var st statsView
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &st) != nil {
		problems = append(problems, fmt.Sprintf("GET /v1/stats: %d %s %v", code, body, err))
	} else {
		for _, tr := range st.Tiers {
			if tr.Pending != 0 || tr.InFlight != 0 || tr.Due != 0 {
				problems = append(problems, fmt.Sprintf("/v1/stats tier %d: pending %d, due %d, in_flight %d", tr.Tier, tr.Pending, tr.Due, tr.InFlight))
			}
		}
		if len(st.Tiers) != tiers {
			problems = append(problems, fmt.Sprintf("/v1/stats reports %d tiers, configured %d", len(st.Tiers), tiers))
		}
	}
	return problems
}

// subKind names a subscription's role and whether it was deleted.
func (c *chaos) subKind(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.subs[id]
	switch {
	case s == nil:
		return "unknown (a create whose answer was lost)"
	case !s.deleting.IsZero():
		return "deleted " + s.role
	case s.checked:
		return "live healthy " + s.role
	}
	return "live " + s.role
}

// describeDelivery says what herald knows of event's delivery to sub.
func (c *chaos) describeDelivery(ctx context.Context, event, sub string) string {
	list, err := c.cl.listDeliveries(ctx, "event_id="+event+"&subscription_id="+sub)
	if err != nil {
		return event + ": " + err.Error()
	}
	if len(list) == 0 {
		code, body, _ := c.cl.call(ctx, http.MethodGet, "/v1/events/"+event, nil)
		return fmt.Sprintf("%s: no delivery for this subscription (GET event: %d %s)", event, code, body)
	}
	d := list[0]
	return fmt.Sprintf("%s: delivery %s %s in tier %d after %d attempts (last %s %q)", event, d.ID, d.State, d.Tier, d.AttemptCount, d.LastError, d.LastErrorMessage)
}

// checkStoredErrorTexts: the tls-nul receiver's error text carried a NUL;
// what herald stored (and serves) must not (issue 10 item 1), and the
// attempts must have been recorded at all.
func (c *chaos) checkStoredErrorTexts(ctx context.Context) {
	s := c.byRole["tls-nul"]
	code, body, err := c.cl.call(ctx, http.MethodGet, "/v1/deliveries?limit=20&subscription_id="+s.id, nil)
	var page struct{ Data []deliveryItem }
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &page) != nil {
		c.is.add("listing the tls-nul subscription's deliveries failed", "%d %s %v", code, body, err)
		return
	}
	attempts := 0
	for _, d := range page.Data[:min(len(page.Data), 5)] {
		code, body, err := c.cl.call(ctx, http.MethodGet, "/v1/deliveries/"+d.ID, nil)
		var full deliveryItem
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &full) != nil {
			c.is.add("reading a tls-nul delivery failed", "%s: %d %s %v", d.ID, code, body, err)
			continue
		}
		for _, a := range full.Attempts {
			attempts++
			if strings.ContainsRune(a.ErrorMessage, 0) {
				c.is.add("a stored attempt error message holds a NUL", "delivery %s attempt %d: %q", d.ID, a.N, a.ErrorMessage)
			}
		}
		if strings.ContainsRune(full.LastErrorMessage, 0) {
			c.is.add("a delivery's last_error_message holds a NUL", "delivery %s: %q", d.ID, full.LastErrorMessage)
		}
	}
	if attempts == 0 {
		c.is.add("no attempt of the tls-nul subscription was ever recorded",
			"subscription %s: %d deliveries, none with an attempt (the completer never committed them)", s.id, len(page.Data))
	}
}

func (c *chaos) summary() {
	c.mu.Lock()
	phases := map[string]int{}
	for _, ev := range c.acked {
		phases[ev.phase]++
	}
	subs := len(c.subs)
	c.mu.Unlock()
	c.t.Logf("%s: acknowledged by phase %v; %d failed publishes excused by disruptions; %d hostile requests; %d subscriptions created",
		c.backend, phases, c.excused.Load(), c.hostileN.Load(), subs)
	// The causes of the 500s herald answered, as its logs give them.
	seen := map[string]int{}
	var order []string
	for _, line := range strings.Split(c.logs.Tail(4*logKeep), "\n") {
		i := strings.Index(line, `msg="internal error"`)
		if i < 0 {
			continue
		}
		k := line[i:]
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
	}
	for _, k := range order[:min(len(order), 12)] {
		c.t.Logf("herald logged %d× %s", seen[k], k)
	}
}

func firstN(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:n], ", ") + fmt.Sprintf(", … (%d more)", len(s)-n)
}
