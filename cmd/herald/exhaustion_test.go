package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/push"
)

// TestResourceExhaustion is issue 20's closing test: the real binary, under
// a lowered open-file limit, serves webhook traffic at a fixed rate while
// anonymous clients open push sessions up to and past the caps, flood
// broadcasts and registrations, trickle request bodies and flood an offline
// push endpoint. It proves, on both stores, that every acknowledged event is
// delivered, that /healthz answered throughout, that the node's RSS and open
// files stayed under the bounds below, and (without -race, see
// raceEnabled) that the healthy webhook p99 during the attack stayed
// within 2× of the same run's p99 without it, or at most exSlack above it:
// the baselines here are 4–10 ms, and the attacker's connections are
// processed by the same two cores' kernel, so a few milliseconds of its
// share would otherwise decide the ratio. The
// figures are logged; docs/benchmarks.md keeps them.
//
// It is not parallel: a latency comparison needs the machine to itself.
// To see where latency comes from, EX_DEBUG=1 logs the healthy latency per
// half second, and EX_SKIP leaves parts of the attack out (a comma list of
// sessions, dials, bcast, register, trickle, flood).
func TestResourceExhaustion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) { runExhaustion(t, backend) })
	}
}

const (
	exNoFile     = 1024            // the node's RLIMIT_NOFILE
	exPerIP      = 16              // --push-max-conns-per-ip
	exIPs        = 48              // client source addresses 127.0.0.2…
	exDialsPerIP = 24              // dials from each: past both caps
	exDialRate   = 300             // session dials per second, all addresses together
	exRate       = 50              // healthy publishes per second
	exPhase      = 5 * time.Second // length of each phase
	exRounds     = 3               // pairs of phases, without and with the attack
	exMaxRSS     = 320 << 20       // bound on the node's RSS
	exBodyWait   = 2 * time.Second // --read-timeout in this test
	exTrickles   = 150             // connections trickling a body
	exFloodWait  = 5 * time.Second // how long the offline endpoint is flooded
	exBroadcasts = 64              // ids per broadcast_subscribe frame
	exLongID     = 32000           // characters per flooded broadcast id
	exRegisters  = 3000            // register frames per registering session
	exSlack      = 25 * time.Millisecond
)

func runExhaustion(t *testing.T, backend string) {
	bin := heraldBinary(t)
	addr := freeAddr(t)
	token := "exhaustion-token"
	rec := newRecorder()
	recv := newLoopbackServer(t, rec)

	args := []string{"serve", "--listen", addr, "--dev", "--api-token", token,
		"--push-crypto-keys", push.GenerateKey(),
		"--push-max-conns-per-ip", strconv.Itoa(exPerIP),
		"--read-timeout", exBodyWait.String()}
	args = append(args, storeArgs(t, backend)...)
	logs := &syncBuffer{}
	// The shell lowers the limit and then becomes herald (exec), so the
	// process's pid is herald's.
	cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, exNoFile), bin}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "HERALD_LOG_LEVEL=warn")
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	waitFor(t, 30*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	}, func(last string) string { return "herald not ready: " + last + "\n" + logs.Tail(8<<10) })
	pid := cmd.Process.Pid

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code, out, err := apiCall(ctx, addr, token, http.MethodPost, "/v1/subscriptions", map[string]any{
		"url": recv + "/hook", "event_types": []string{"ex.*"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code, string(out))
	subID := jsonField(t, out, "id")

	// Monitors run through both phases.
	mon := startMonitor(ctx, addr, pid)

	// Phases alternate, so that a drift of this shared machine's speed
	// falls on both sides of the comparison: without the attack, with a
	// new attacker process, and so on, exRounds times.
	load := &exLoad{addr: addr, token: token, sent: map[string]time.Time{}, phase: map[string]string{}}
	var att attackReport
	for round := range exRounds {
		load.run(ctx, "base", round, exPhase)
		stopAttack := startAttacker(t, addr)
		load.run(ctx, "attack", round, exPhase)
		att.add(stopAttack())
	}
	require.Empty(t, att.Errors, "the attacker's own failures")

	// Every acknowledged event arrives.
	waitFor(t, 90*time.Second, func() (bool, string) {
		missing := load.missing(rec, subID)
		return len(missing) == 0, fmt.Sprintf("%d of %d acknowledged events not delivered (first: %v)", len(missing), load.acked(), firstN(missing, 5))
	}, func(last string) string { return last + "\n" + logs.Tail(8<<10) })
	mon.stop()

	base, hostile := load.latencies(rec, subID, "base"), load.latencies(rec, subID, "attack")
	if os.Getenv("EX_DEBUG") != "" {
		load.debug(t, rec, subID)
	}
	p99b, p99a := quantile(base, 0.99), quantile(hostile, 0.99)
	t.Logf("%s: healthy p99 %s without the attack, %s with it (%d and %d events)", backend, fmtLatency(p99b), fmtLatency(p99a), len(base), len(hostile))
	t.Logf("%s: node max RSS %.1f MB, max open files %d (limit %d); /healthz %d answered, %d failed (slowest %s)",
		backend, float64(mon.maxRSS.Load())/(1<<20), mon.maxFDs.Load(), exNoFile, mon.healthOK.Load(), mon.healthFail.Load(), time.Duration(mon.healthSlowest.Load()))
	t.Logf("%s: push sessions held %d, refused %d (503 before upgrade %d, closed 1013 %d); broadcast floods cut %d; registers refused %d of %d; trickled bodies cut %d of %d (slowest %s); offline endpoint 201 %d, 429 %d",
		backend, att.Held, att.Refused503+att.Refused1013, att.Refused503, att.Refused1013,
		att.BroadcastCut, att.RegisterRefused, att.RegisterSent,
		att.TrickleCut, exRounds*exTrickles, att.TrickleSlowest, att.Flood201, att.Flood429)

	require.Zero(t, load.failed, "every healthy publish must be acknowledged; last failure: %s", load.lastErr)
	require.Zero(t, mon.healthFail.Load(), "/healthz must answer 200 within 2 s throughout; last error: %v", mon.lastErr())
	require.Less(t, mon.maxFDs.Load(), int64(exNoFile), "open files must stay under the limit")
	require.Less(t, mon.maxRSS.Load(), int64(exMaxRSS), "RSS bound")
	require.Positive(t, att.Held, "some push sessions must be admitted")
	require.Positive(t, att.Refused503+att.Refused1013, "sessions past the caps must be refused")
	require.LessOrEqual(t, att.MaxHeldPerIP, int64(exPerIP), "per-IP cap")
	require.Equal(t, int64(exRounds*exTrickles), att.TrickleCut, "every trickled body must be cut")
	require.Less(t, att.TrickleSlowest, exBodyWait+5*time.Second, "trickled bodies cut near the deadline")
	require.Positive(t, att.Flood429, "the offline endpoint's flood must be refused past its caps")
	require.Positive(t, att.RegisterRefused, "registrations past the cap must be refused")
	require.Equal(t, att.BroadcastSent, att.BroadcastCut, "every oversized broadcast frame must be refused")
	if raceEnabled {
		// The publisher and the receiver run in this race-instrumented
		// process: their own slowness under contention decides the
		// figure (PostgreSQL: 32 and 40 ms with the attack against 7.5
		// and 8.3 ms without, where the same test without -race
		// measured 18–25 ms against 7.5–9.9).
		t.Logf("%s: the latency bound is checked only without -race", backend)
		return
	}
	require.LessOrEqual(t, p99a, max(2*p99b, p99b+exSlack), "healthy p99 with the attack within 2× of without (or %s above it)", exSlack)
}

// newLoopbackServer serves h on a loopback port and returns its base URL.
func newLoopbackServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func jsonField(t *testing.T, b []byte, name string) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	s, _ := m[name].(string)
	require.NotEmpty(t, s, string(b))
	return s
}

// ---------------------------------------------------------------------------
// The healthy load

type exLoad struct {
	addr, token string
	mu          sync.Mutex
	sent        map[string]time.Time // event id → publish start
	phase       map[string]string    // event id → phase
	failed      int                  // publishes not answered 202
	lastErr     string
}

// run publishes at exRate for d, one event per tick, each acknowledged
// before it counts.
func (l *exLoad) run(ctx context.Context, phase string, round int, d time.Duration) {
	tick := time.NewTicker(time.Second / exRate)
	defer tick.Stop()
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		id := fmt.Sprintf("ex-%s%d-%05d", phase, round, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			code, _, err := apiCall(cctx, l.addr, l.token, http.MethodPost, "/v1/events", map[string]any{
				"id": id, "type": "ex.tick", "data": map[string]any{"i": i}})
			l.mu.Lock()
			defer l.mu.Unlock()
			if err != nil || code != http.StatusAccepted {
				l.failed++
				l.lastErr = fmt.Sprintf("%s: %d %v", id, code, err)
				return
			}
			l.sent[id] = start
			l.phase[id] = phase
		}()
	}
	wg.Wait()
}

func (l *exLoad) debug(t *testing.T, rec *recorder, sub string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, st := range l.sent {
		if first.IsZero() || st.Before(first) {
			first = st
		}
	}
	buckets := map[int][]time.Duration{}
	for id, st := range l.sent {
		if at, ok := rec.arrival(sub, id); ok {
			b := int(st.Sub(first) / (500 * time.Millisecond))
			buckets[b] = append(buckets[b], at.Sub(st))
		}
	}
	for b := 0; b < 40; b++ {
		if len(buckets[b]) > 0 {
			t.Logf("t=%4.1fs n=%d p50=%s max=%s", float64(b)/2, len(buckets[b]), quantile(buckets[b], 0.5), quantile(buckets[b], 1))
		}
	}
}

func (l *exLoad) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

func (l *exLoad) missing(rec *recorder, sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id := range l.sent {
		if _, ok := rec.arrival(sub, id); !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (l *exLoad) latencies(rec *recorder, sub, phase string) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for id, start := range l.sent {
		if l.phase[id] != phase {
			continue
		}
		if at, ok := rec.arrival(sub, id); ok {
			out = append(out, at.Sub(start))
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Monitors: /healthz, RSS and open files of the node

type monitor struct {
	cancel                              context.CancelFunc
	wg                                  sync.WaitGroup
	maxRSS, maxFDs                      atomic.Int64
	healthOK, healthFail, healthSlowest atomic.Int64
	mu                                  sync.Mutex
	err                                 error
}

func startMonitor(ctx context.Context, addr string, pid int) *monitor {
	ctx, cancel := context.WithCancel(ctx)
	m := &monitor{cancel: cancel}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		for ctx.Err() == nil {
			start := time.Now()
			resp, err := client.Get("http://" + addr + "/healthz")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("/healthz: %s", resp.Status)
				}
			}
			if err != nil {
				m.healthFail.Add(1)
				m.mu.Lock()
				m.err = err
				m.mu.Unlock()
			} else {
				m.healthOK.Add(1)
			}
			if d := int64(time.Since(start)); d > m.healthSlowest.Load() {
				m.healthSlowest.Store(d)
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}()
	go func() {
		defer m.wg.Done()
		for ctx.Err() == nil {
			if rss := procRSS(pid); rss > m.maxRSS.Load() {
				m.maxRSS.Store(rss)
			}
			if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil && int64(len(ents)) > m.maxFDs.Load() {
				m.maxFDs.Store(int64(len(ents)))
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}()
	return m
}

func (m *monitor) stop() { m.cancel(); m.wg.Wait() }

func (m *monitor) lastErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// procRSS reads VmRSS (bytes) of pid, 0 when it cannot.
func procRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// ---------------------------------------------------------------------------
// The attack

type attack struct {
	addr string
	errs []string // what went wrong on the attacker's side

	held, refused503, refused1013 atomic.Int64
	broadcastSent, broadcastCut   atomic.Int64
	registerSent, registerRefused atomic.Int64
	trickleCut, trickleSlowest    atomic.Int64
	flood201, flood429            atomic.Int64
	mu                            sync.Mutex
	perIP                         map[string]int64
	conns                         []*websocket.Conn
	raw                           []net.Conn
}

func (a *attack) fail(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs = append(a.errs, fmt.Sprintf(format, args...))
}

// attackReport is what the attacker process prints when it ends.
type attackReport struct {
	Held, Refused503, Refused1013, BroadcastSent, BroadcastCut    int64
	RegisterSent, RegisterRefused, TrickleCut, Flood201, Flood429 int64
	TrickleSlowest                                                time.Duration
	MaxHeldPerIP                                                  int64
	Errors                                                        []string
}

// add sums r into t (slowest and per-address figures: the largest).
func (t *attackReport) add(r attackReport) {
	t.Held += r.Held
	t.Refused503 += r.Refused503
	t.Refused1013 += r.Refused1013
	t.BroadcastSent += r.BroadcastSent
	t.BroadcastCut += r.BroadcastCut
	t.RegisterSent += r.RegisterSent
	t.RegisterRefused += r.RegisterRefused
	t.TrickleCut += r.TrickleCut
	t.Flood201 += r.Flood201
	t.Flood429 += r.Flood429
	t.TrickleSlowest = max(t.TrickleSlowest, r.TrickleSlowest)
	t.MaxHeldPerIP = max(t.MaxHeldPerIP, r.MaxHeldPerIP)
	t.Errors = append(t.Errors, r.Errors...)
}

func (a *attack) report() attackReport {
	r := attackReport{
		Held: a.held.Load(), Refused503: a.refused503.Load(), Refused1013: a.refused1013.Load(),
		BroadcastSent: a.broadcastSent.Load(), BroadcastCut: a.broadcastCut.Load(),
		RegisterSent: a.registerSent.Load(), RegisterRefused: a.registerRefused.Load(),
		TrickleCut: a.trickleCut.Load(), Flood201: a.flood201.Load(), Flood429: a.flood429.Load(),
		TrickleSlowest: time.Duration(a.trickleSlowest.Load()), MaxHeldPerIP: a.maxHeldPerIP(),
	}
	a.mu.Lock()
	r.Errors = slices.Clone(a.errs)
	a.mu.Unlock()
	return r
}

// exAttackEnv names the node's address in the environment of the attacker
// process (this test binary, started again by TestResourceExhaustion).
const exAttackEnv = "HERALD_TEST_EXHAUSTION_ATTACK"

// TestMain lets this test binary be the attacker process: with exAttackEnv
// set it attacks that address until its stdin closes, then prints its
// attackReport as JSON and exits.
func TestMain(m *testing.M) {
	if addr := os.Getenv(exAttackEnv); addr != "" {
		a := &attack{addr: addr}
		stop := a.start(context.Background())
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
		_ = json.NewEncoder(os.Stdout).Encode(a.report())
		os.Exit(0)
	}
	testdb.Main(m)
}

// startAttacker runs the attack in a process of its own at the lowest CPU
// priority (nice 19): on this machine the attacker shares two cores with
// the node and with the test's own publisher and receiver, where a real
// attacker spends its own machine's CPU. Niceness keeps the attacker's CPU
// from passing for the node's slowness; every connection, frame and body
// still reaches the node. The returned function ends the attack and
// returns the attacker's report.
func startAttacker(t *testing.T, addr string) func() attackReport {
	t.Helper()
	cmd := exec.Command("nice", "-n", "19", attackerBinary(t))
	cmd.Env = append(os.Environ(), exAttackEnv+"="+addr)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return func() attackReport {
		_ = stdin.Close()
		require.NoError(t, cmd.Wait(), "attacker: %s", out.String())
		var r attackReport
		s := out.String()
		require.NoError(t, json.Unmarshal([]byte(s[strings.LastIndex(s[:len(s)-1], "\n")+1:]), &r), "attacker output: %s", s)
		return r
	}
}

// attackerBinary builds this test package without the race detector (go
// test -c): the attacker is measured against the node, and under -race
// (what CI runs) its goroutines cost several times the CPU they cost a
// real attacker's process. Built once per test binary.
func attackerBinary(t *testing.T) string {
	t.Helper()
	attackerBuild.Do(func() {
		dir, err := os.MkdirTemp("", "herald-attacker-")
		if err != nil {
			attackerBuild.err = err
			return
		}
		attackerBuild.path = filepath.Join(dir, "attacker")
		out, err := exec.Command("go", "test", "-c", "-o", attackerBuild.path, ".").CombinedOutput()
		if err != nil {
			attackerBuild.err = fmt.Errorf("go test -c: %w\n%s", err, out)
		}
	})
	require.NoError(t, attackerBuild.err)
	return attackerBuild.path
}

var attackerBuild struct {
	sync.Once
	path string
	err  error
}

func (a *attack) maxHeldPerIP() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var m int64
	for _, n := range a.perIP {
		m = max(m, n)
	}
	return m
}

// start launches every kind of abuse and returns the function that ends it
// (closing every connection it opened).
func (a *attack) start(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	a.perIP = map[string]int64{}
	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	if !strings.Contains(os.Getenv("EX_SKIP"), "sessions") {
		run(a.sessions)
	}
	if !strings.Contains(os.Getenv("EX_SKIP"), "trickle") {
		run(a.trickle)
	}
	if !strings.Contains(os.Getenv("EX_SKIP"), "flood") {
		run(a.flood)
	}
	return func() {
		cancel()
		wg.Wait()
		a.mu.Lock()
		for _, c := range a.conns {
			_ = c.Close()
		}
		for _, c := range a.raw {
			_ = c.Close()
		}
		a.mu.Unlock()
	}
}

// hello dials a push session from the source address ip and says hello;
// it sorts refusals (503 before the upgrade, close 1013 after it).
func (a *attack) hello(ctx context.Context, ip string) (*websocket.Conn, error) {
	d := &websocket.Dialer{
		HandshakeTimeout: 5 * time.Second,
		NetDialContext:   (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext,
	}
	ws, resp, err := d.DialContext(ctx, "ws://"+a.addr+"/", nil)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
			a.refused503.Add(1)
		}
		return nil, err
	}
	if err := ws.WriteJSON(map[string]any{"messageType": "hello", "use_webpush": true}); err != nil {
		_ = ws.Close()
		return nil, err
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var r map[string]any
	if err := ws.ReadJSON(&r); err != nil {
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code == websocket.CloseTryAgainLater {
			a.refused1013.Add(1)
		}
		_ = ws.Close()
		return nil, err
	}
	_ = ws.SetReadDeadline(time.Time{})
	if r["messageType"] != "hello" {
		_ = ws.Close()
		return nil, fmt.Errorf("hello answered %v", r)
	}
	a.held.Add(1)
	a.mu.Lock()
	a.perIP[ip]++
	a.conns = append(a.conns, ws)
	a.mu.Unlock()
	return ws, nil
}

// sessions first opens twelve sessions from one address and floods
// broadcasts on eight of them and registrations on four; meanwhile it opens
// exDialsPerIP sessions from each of exIPs other addresses and holds them.
func (a *attack) sessions(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range 12 {
		ws, err := a.hello(ctx, fmt.Sprintf("127.0.1.%d", i+1))
		if err != nil {
			a.fail("flooding session: hello: %v", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i < 8 {
				if !strings.Contains(os.Getenv("EX_SKIP"), "bcast") {
					a.broadcastFlood(ws)
				}
			} else if !strings.Contains(os.Getenv("EX_SKIP"), "register") {
				a.registerFlood(ctx, ws)
			}
		}()
	}
	// Sessions are opened at a fixed rate, as the healthy load publishes:
	// the caps are reached in about two seconds and passed for the rest of
	// the phase (a storm as fast as this machine dials mostly measures the
	// attacker's and the kernel's share of the two cores).
	pace := rate.NewLimiter(exDialRate, 1)
	for i := range exIPs {
		if strings.Contains(os.Getenv("EX_SKIP"), "dials") {
			break
		}
		ip := fmt.Sprintf("127.0.0.%d", i+2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range exDialsPerIP {
				if pace.Wait(ctx) != nil {
					return
				}
				_, _ = a.hello(ctx, ip)
			}
		}()
	}
	wg.Wait()
}

// broadcastFlood sends one broadcast_subscribe of exBroadcasts ids of
// exLongID characters: past the frame limit, the node must close the
// session rather than keep it.
func (a *attack) broadcastFlood(ws *websocket.Conn) {
	ids := map[string]string{}
	for i := range exBroadcasts {
		ids[fmt.Sprintf("%d-%s", i, strings.Repeat("b", exLongID))] = strings.Repeat("v", exLongID)
	}
	a.broadcastSent.Add(1)
	if err := ws.WriteJSON(map[string]any{"messageType": "broadcast_subscribe", "broadcasts": ids}); err != nil {
		a.broadcastCut.Add(1) // the node closed before the whole frame went
		return
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) || errors.Is(err, io.EOF) || isConnReset(err) {
				a.broadcastCut.Add(1)
			}
			return
		}
	}
}

// registerFlood registers exRegisters channels as fast as the session
// answers and counts the refusals.
func (a *attack) registerFlood(ctx context.Context, ws *websocket.Conn) {
	for i := range exRegisters {
		if ctx.Err() != nil {
			return
		}
		chid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, time.Now().UnixNano()&0xffffffffffff)
		a.registerSent.Add(1)
		if err := ws.WriteJSON(map[string]any{"messageType": "register", "channelID": chid}); err != nil {
			a.registerRefused.Add(int64(exRegisters - i))
			return
		}
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		var r map[string]any
		if err := ws.ReadJSON(&r); err != nil {
			a.registerRefused.Add(int64(exRegisters - i))
			return
		}
		if st, _ := r["status"].(float64); st != 200 {
			a.registerRefused.Add(1)
		}
	}
}

// trickle opens exTrickles connections that announce a 1 MiB publish and
// send one byte of it; each must be cut near the body deadline.
func (a *attack) trickle(ctx context.Context) {
	var wg sync.WaitGroup
	for range exTrickles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", a.addr)
			if err != nil {
				return
			}
			a.mu.Lock()
			a.raw = append(a.raw, c)
			a.mu.Unlock()
			start := time.Now()
			_, err = fmt.Fprintf(c, "POST /v1/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{", a.addr)
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(exBodyWait + 20*time.Second))
			_, _ = io.Copy(io.Discard, c) // returns when the node closes
			if time.Since(start) < exBodyWait+20*time.Second {
				a.trickleCut.Add(1)
				if d := int64(time.Since(start)); d > a.trickleSlowest.Load() {
					a.trickleSlowest.Store(d)
				}
			}
		}()
	}
	wg.Wait()
}

// flood registers a channel, leaves (the browser is offline) and sends 4 KB
// messages to its endpoint for exFloodWait from four senders.
func (a *attack) flood(ctx context.Context) {
	ws, err := a.hello(ctx, "127.0.0.250")
	if err != nil {
		a.fail("flood: hello: %v", err)
		return
	}
	chid := "0f100d00-0000-4000-8000-000000000001"
	// The register flood may have spent --push-register-node-rate: like a
	// site, retry a 429 (for 10 s at most).
	var r map[string]any
	for retry := time.Now().Add(10 * time.Second); ; {
		if err := ws.WriteJSON(map[string]any{"messageType": "register", "channelID": chid}); err != nil {
			a.fail("flood: register: %v", err)
			return
		}
		r = nil
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		err := ws.ReadJSON(&r)
		if err == nil && r["status"] == float64(http.StatusTooManyRequests) && time.Now().Before(retry) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond) // a client's back-off, not a wait for a condition
			continue
		}
		if err != nil || r["status"] != float64(200) {
			a.fail("flood: register answered %v, %v", r, err)
			return
		}
		break
	}
	endpoint, _ := r["pushEndpoint"].(string)
	_ = ws.Close()
	body := strings.Repeat("x", 4000)
	// The flood lasts exFloodWait and until the caps have refused a send
	// (at most a minute), even past the attack's end: on a slow machine
	// exFloodWait may not be enough to fill the caps.
	end, hardEnd := time.Now().Add(exFloodWait), time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for now := time.Now(); now.Before(hardEnd) && (now.Before(end) || a.flood429.Load() == 0); now = time.Now() {
				code, err := pushSend(endpoint, body)
				switch {
				case err != nil:
				case code == http.StatusCreated:
					a.flood201.Add(1)
				case code == http.StatusTooManyRequests:
					a.flood429.Add(1)
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

func isConnReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}
