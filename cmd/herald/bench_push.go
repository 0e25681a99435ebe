package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/heraldhq/herald/bench"
)

// herald bench push measures the Web Push service of a herald child
// process (a fresh `herald serve` on SQLite, so its memory is its own):
//   - idle: N user agents connected and idle; the child's resident memory
//     growth per connection;
//   - rate: messages at a fixed rate to connected user agents that ack;
//     sender→user-agent latency;
//   - max: as fast as possible; messages/s beside the raw HTTP ceiling
//     measured in the same run;
//   - drain: a user agent reconnecting to stored messages; time until all
//     arrived.

type pushBenchFlags struct {
	scenarios  string
	idleConns  int
	uas        int
	rate       int
	duration   time.Duration
	payload    int
	drain      int
	ceilingMax time.Duration
	sources    int
	jsonOut    bool
	keep       bool
	extraServe string
	binary     string
}

type pushBenchResult struct {
	Idle  *idleResult  `json:"idle,omitempty"`
	Rate  *rateResult  `json:"rate,omitempty"`
	Max   *rateResult  `json:"max,omitempty"`
	Drain *drainResult `json:"drain,omitempty"`
}

type idleResult struct {
	Connections   int     `json:"connections"`
	Open          int     `json:"open_at_end"`
	Seconds       float64 `json:"seconds"`
	PerSecond     float64 `json:"connections_per_second"`
	RSSBeforeMB   float64 `json:"rss_before_mb"`
	RSSAfterMB    float64 `json:"rss_after_mb"`
	BytesPerConn  float64 `json:"rss_bytes_per_connection"`
	FailedConnect int64   `json:"failed_connects"`
	// From the node's /metrics (Go runtime) before and after, per
	// connection: where the resident memory went.
	StackPerConn float64 `json:"stack_bytes_per_connection"`
	HeapPerConn  float64 `json:"heap_bytes_per_connection"`
	// NoFileLimit is the open-file limit that bounds the connections of
	// one process here.
	NoFileLimit uint64 `json:"nofile_limit"`
}

type rateResult struct {
	UserAgents int     `json:"user_agents"`
	TargetRate int     `json:"target_rate,omitempty"`
	Sent       int64   `json:"sent"`
	Received   int64   `json:"received"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"per_second"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	// NodeCPUMicros is the node's user+system CPU per message sent
	// (/proc/<pid>/stat), independent of the bench's own share of cores.
	NodeCPUMicros float64              `json:"node_cpu_us_per_message"`
	Ceiling       *bench.CeilingResult `json:"ceiling,omitempty"`
	CeilingRatio  float64              `json:"ceiling_ratio,omitempty"`
}

type drainResult struct {
	Messages int     `json:"messages"`
	Received int     `json:"received"`
	Ms       float64 `json:"ms"`
}

func runBenchPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f pushBenchFlags
	fs := flag.NewFlagSet("herald bench push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.scenarios, "scenarios", "idle,rate,max,drain", "which to run, comma-separated: idle, rate, max, drain")
	fs.IntVar(&f.idleConns, "idle-conns", 100_000, "idle: WebSocket connections to hold open")
	fs.IntVar(&f.sources, "sources", 8, "idle: loopback source addresses (127.0.0.2…) the connections are spread over (about 28,000 ports each)")
	fs.IntVar(&f.uas, "user-agents", 64, "rate, max: connected user agents, each with one sender")
	fs.IntVar(&f.rate, "rate", 1000, "rate: messages per second")
	fs.DurationVar(&f.duration, "duration", 5*time.Second, "rate, max: how long to send")
	fs.IntVar(&f.payload, "payload", 1024, "bytes of message body")
	fs.IntVar(&f.drain, "drain", 150, "drain: stored messages the user agent reconnects to (at most --push-msg-limit, 150)")
	fs.DurationVar(&f.ceilingMax, "ceiling-time", 5*time.Second, "max: longest raw HTTP ceiling run (0 skips it)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object instead of the report")
	fs.BoolVar(&f.keep, "keep", false, "keep the child's data directory")
	fs.StringVar(&f.extraServe, "serve-flags", "", "extra flags for the child herald serve, space-separated")
	fs.StringVar(&f.binary, "herald-binary", "", "herald binary to run as the child (default: this one)")
	if err := fs.Parse(args); err != nil {
		return usageError{err} // exit code 2
	}
	if f.payload < 16 || f.payload > 4096 {
		return errors.New("--payload must be 16..4096")
	}
	raiseNoFile()
	child, err := startPushChild(ctx, &f, stderr)
	if err != nil {
		return err
	}
	defer child.stop()

	res := &pushBenchResult{}
	for _, sc := range strings.Split(f.scenarios, ",") {
		if ctx.Err() != nil {
			break
		}
		switch strings.TrimSpace(sc) {
		case "idle":
			res.Idle, err = benchIdle(ctx, child, &f, stderr)
		case "rate":
			res.Rate, err = benchRate(ctx, child, &f, f.rate)
		case "max":
			res.Max, err = benchRate(ctx, child, &f, 0)
			if err == nil && f.ceilingMax > 0 {
				var c bench.CeilingResult
				c, err = pushCeiling(ctx, &f)
				res.Max.Ceiling = &c
				if c.PerSecond > 0 {
					res.Max.CeilingRatio = res.Max.PerSecond / c.PerSecond
				}
			}
		case "drain":
			res.Drain, err = benchDrain(ctx, child, &f)
		case "":
		default:
			return fmt.Errorf("unknown scenario %q", sc)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printPushBench(stdout, res)
	return nil
}

// raiseNoFile lifts the open-file limit to the hard limit (root: to
// nr_open): 100,000 sockets on each side.
func raiseNoFile() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return
	}
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > r.Max {
			r.Max = n
		}
	}
	r.Cur = r.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
}

type pushChild struct {
	cmd  *exec.Cmd
	addr string
	dir  string
	keep bool
	logs *tailBuffer
}

func startPushChild(ctx context.Context, f *pushBenchFlags, stderr io.Writer) (*pushChild, error) {
	exe := f.binary
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "herald-bench-push-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	// The bench's clients come from eight loopback addresses (no
	// per-address session cap), register all at once (no per-address or
	// node register limit), drive one endpoint far beyond a fair sender's
	// --push-send-rate and drain stores more than one channel's cap: the
	// abuse caps are off unless --serve-flags sets them.
	args := []string{"serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--dev", "--api-token", "bench-token", "--log-level", "warn",
		"--push-max-conns-per-ip", "0", "--push-register-ip-rate", "0", "--push-register-node-rate", "0",
		"--push-send-rate", "0", "--push-max-messages-per-channel", "0", "--push-max-messages-per-uaid", "0"}
	if f.extraServe != "" {
		args = append(args, strings.Fields(f.extraServe)...)
	}
	cmd := exec.Command(exe, args...) //nolint:gosec // G204: runs herald's own binary with the bench's flags
	logs := &tailBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &pushChild{cmd: cmd, addr: addr, dir: dir, keep: f.keep, logs: logs}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.stop()
			return nil, fmt.Errorf("herald serve did not become ready: %s", logs.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(stderr, "bench push: herald serve pid %d on %s\n", cmd.Process.Pid, addr)
	return c, nil
}

func (c *pushChild) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
	if !c.keep {
		_ = os.RemoveAll(c.dir)
	}
}

// rssBytes reads the child's resident set from /proc.
func (c *pushChild) rssBytes() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuSeconds reads the child's user+system CPU time from /proc.
func (c *pushChild) cpuSeconds() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which is in parentheses): utime and
	// stime are the 12th and 13th of them, in clock ticks (100 Hz on Linux).
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// goMemory reads the node's Go stack and heap in use from its /metrics.
func (c *pushChild) goMemory() (stack, heap float64) {
	resp, err := http.Get("http://" + c.addr + "/metrics")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		x, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
		switch name {
		case "go_memstats_stack_inuse_bytes":
			stack = x
		case "go_memstats_heap_inuse_bytes":
			heap = x
		}
	}
	return stack, heap
}

// benchUA is a user agent of the bench.
type benchUA struct {
	ws       *websocket.Conn
	uaid     string
	endpoint string
	chid     string
}

var benchDialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024}

func dialBenchUA(ctx context.Context, addr, uaid string, register bool, d *websocket.Dialer) (*benchUA, error) {
	ws, _, err := d.DialContext(ctx, "ws://"+addr+"/", nil) //nolint:bodyclose // the websocket dialer has already read and replaced the handshake body
	if err != nil {
		return nil, err
	}
	ua := &benchUA{ws: ws}
	hello := map[string]any{"messageType": "hello", "use_webpush": true}
	if uaid != "" {
		hello["uaid"] = uaid
	}
	if err := ws.WriteJSON(hello); err != nil {
		_ = ws.Close()
		return nil, err
	}
	var r map[string]any
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.ReadJSON(&r); err != nil || r["messageType"] != "hello" {
		_ = ws.Close()
		return nil, fmt.Errorf("hello: %v %v", r, err) //nolint:errorlint // err is nil when the answer was not a hello
	}
	ua.uaid, _ = r["uaid"].(string)
	if register {
		ua.chid = fmt.Sprintf("%08x-0000-4000-8000-%s", time.Now().UnixNano()&0xffffffff, ua.uaid[:12])
		if err := ws.WriteJSON(map[string]any{"messageType": "register", "channelID": ua.chid}); err != nil {
			_ = ws.Close()
			return nil, err
		}
		if err := ws.ReadJSON(&r); err != nil || r["messageType"] != "register" {
			_ = ws.Close()
			return nil, fmt.Errorf("register: %v %v", r, err) //nolint:errorlint // err is nil when the answer was not a register
		}
		ua.endpoint, _ = r["pushEndpoint"].(string)
	}
	_ = ws.SetReadDeadline(time.Time{})
	return ua, nil
}

func benchIdle(ctx context.Context, c *pushChild, f *pushBenchFlags, stderr io.Writer) (*idleResult, error) {
	// A warm-up connection, then the baseline.
	if ua, err := dialBenchUA(ctx, c.addr, "", false, benchDialer); err == nil {
		_ = ua.ws.Close()
	}
	time.Sleep(time.Second)
	res := &idleResult{Connections: f.idleConns, RSSBeforeMB: c.rssBytes() / (1 << 20)}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		res.NoFileLimit = lim.Cur
	}
	stack0, heap0 := c.goMemory()
	dialers := make([]*websocket.Dialer, max(f.sources, 1))
	for i := range dialers {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}
		nd := &net.Dialer{LocalAddr: local, Timeout: 10 * time.Second}
		dialers[i] = &websocket.Dialer{NetDialContext: nd.DialContext, HandshakeTimeout: 30 * time.Second, ReadBufferSize: 256, WriteBufferSize: 256}
	}
	conns := make([]*websocket.Conn, f.idleConns)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= f.idleConns || ctx.Err() != nil {
					return
				}
				ua, err := dialBenchUA(ctx, c.addr, "", false, dialers[i%len(dialers)])
				if err != nil {
					if failed.Add(1) == 1 {
						fmt.Fprintf(stderr, "bench push: connect failed: %v\n", err)
					}
					continue
				}
				conns[i] = ua.ws
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.PerSecond = float64(f.idleConns) / res.Seconds
	res.FailedConnect = failed.Load()
	// Let the node settle (GC) before reading its memory.
	time.Sleep(3 * time.Second)
	res.RSSAfterMB = c.rssBytes() / (1 << 20)
	stack1, heap1 := c.goMemory()
	// Every connection is still open: a ping through each would take
	// long; a non-blocking read that times out at once tells a live
	// socket from one the server closed.
	for _, ws := range conns {
		if ws == nil {
			continue
		}
		_ = ws.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, _, err := ws.NextReader()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			res.Open++
		}
	}
	opened := f.idleConns - int(res.FailedConnect)
	if opened > 0 {
		res.BytesPerConn = (res.RSSAfterMB - res.RSSBeforeMB) * (1 << 20) / float64(opened)
		res.StackPerConn = (stack1 - stack0) / float64(opened)
		res.HeapPerConn = (heap1 - heap0) / float64(opened)
	}
	for _, ws := range conns {
		if ws != nil {
			_ = ws.Close()
		}
	}
	return res, nil
}

// benchRate sends to connected user agents that ack at once: at rate
// messages/s in all, or as fast as the senders go when rate is 0.
func benchRate(ctx context.Context, c *pushChild, f *pushBenchFlags, rate int) (*rateResult, error) {
	uas := make([]*benchUA, f.uas)
	for i := range uas {
		ua, err := dialBenchUA(ctx, c.addr, "", true, benchDialer)
		if err != nil {
			return nil, err
		}
		uas[i] = ua
		defer ua.ws.Close()
	}
	res := &rateResult{UserAgents: f.uas, TargetRate: rate}
	var lat bench.Recorder
	var received, errs atomic.Int64
	var rwg sync.WaitGroup
	for _, ua := range uas {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				var n struct {
					MessageType string `json:"messageType"`
					ChannelID   string `json:"channelID"`
					Version     string `json:"version"`
					Data        string `json:"data"`
				}
				if err := ua.ws.ReadJSON(&n); err != nil {
					return
				}
				if n.MessageType != "notification" {
					continue
				}
				if b, err := base64.RawURLEncoding.DecodeString(n.Data); err == nil && len(b) >= 8 {
					lat.Add(time.Since(time.Unix(0, int64(binary.BigEndian.Uint64(b)))))
				}
				received.Add(1)
				ack := fmt.Sprintf(`{"messageType":"ack","updates":[{"channelID":%q,"version":%q,"code":100}]}`, n.ChannelID, n.Version)
				if err := ua.ws.WriteMessage(websocket.TextMessage, []byte(ack)); err != nil {
					return
				}
			}
		}()
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: f.uas, Proxy: nil}, Timeout: 30 * time.Second}
	body := make([]byte, f.payload)
	var sent atomic.Int64
	// At a fixed rate each sender has its own schedule: sender i sends at
	// start + i·gap + k·uas·gap, gap = 1s/rate. A sender that falls behind
	// sends at once (its latency is measured from the actual send).
	var gap time.Duration
	if rate > 0 {
		gap = time.Second / time.Duration(rate)
	}
	end := time.Now().Add(f.duration)
	cpu0 := c.cpuSeconds()
	start := time.Now()
	var swg sync.WaitGroup
	for i, ua := range uas {
		swg.Add(1)
		go func() {
			defer swg.Done()
			b := make([]byte, len(body))
			next := start.Add(time.Duration(i) * gap)
			for time.Now().Before(end) && ctx.Err() == nil {
				if rate > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
					next = next.Add(time.Duration(len(uas)) * gap)
					if !next.Before(end.Add(time.Duration(len(uas)) * gap)) {
						return
					}
				}
				binary.BigEndian.PutUint64(b, uint64(time.Now().UnixNano()))
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ua.endpoint, bytes.NewReader(b))
				req.Header.Set("TTL", "60")
				req.Header.Set("Content-Encoding", "aes128gcm")
				resp, err := client.Do(req)
				if err != nil {
					errs.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errs.Add(1)
					continue
				}
				sent.Add(1)
			}
		}()
	}
	swg.Wait()
	res.Seconds = time.Since(start).Seconds()
	// Every 201 came after the ack, so everything sent was received.
	res.Sent, res.Received, res.Errors = sent.Load(), received.Load(), errs.Load()
	res.PerSecond = float64(res.Sent) / res.Seconds
	if res.Sent > 0 {
		res.NodeCPUMicros = (c.cpuSeconds() - cpu0) * 1e6 / float64(res.Sent)
	}
	q := lat.Quantiles(0.5, 0.99, 1)
	res.P50Ms, res.P99Ms, res.MaxMs = q[0], q[1], q[2] // milliseconds
	for _, ua := range uas {
		_ = ua.ws.Close()
	}
	rwg.Wait()
	return res, nil
}

// pushCeiling is the raw HTTP ceiling of this machine for the same body
// size and concurrency: a server that answers at once.
func pushCeiling(ctx context.Context, f *pushBenchFlags) (bench.CeilingResult, error) {
	recv, err := bench.NewReceiver(bench.ReceiverConfig{})
	if err != nil {
		return bench.CeilingResult{}, err
	}
	defer recv.Close()
	return bench.Ceiling(ctx, recv, make([]byte, f.payload), f.uas, 1<<40, f.ceilingMax)
}

// benchDrain stores messages for a disconnected user agent, then times its
// reconnect until every message arrived (acking each).
func benchDrain(ctx context.Context, c *pushChild, f *pushBenchFlags) (*drainResult, error) {
	ua, err := dialBenchUA(ctx, c.addr, "", true, benchDialer)
	if err != nil {
		return nil, err
	}
	_ = ua.ws.Close()
	time.Sleep(100 * time.Millisecond) // the session's teardown clears the router record
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range f.drain {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ua.endpoint, strings.NewReader(fmt.Sprintf("stored-%04d-%s", i, strings.Repeat("x", f.payload))))
		req.Header.Set("TTL", "600")
		req.Header.Set("Content-Encoding", "aes128gcm")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return nil, fmt.Errorf("store answered %d", resp.StatusCode)
		}
	}
	res := &drainResult{Messages: f.drain}
	start := time.Now()
	again, err := dialBenchUA(ctx, c.addr, ua.uaid, false, benchDialer)
	if err != nil {
		return nil, err
	}
	defer again.ws.Close()
	_ = again.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for res.Received < f.drain {
		var n map[string]any
		if err := again.ws.ReadJSON(&n); err != nil {
			return res, fmt.Errorf("after %d of %d: %w", res.Received, f.drain, err)
		}
		if n["messageType"] != "notification" {
			continue
		}
		res.Received++
		if err := again.ws.WriteJSON(map[string]any{"messageType": "ack", "updates": []map[string]any{{"channelID": n["channelID"], "version": n["version"], "code": 100}}}); err != nil {
			return res, err
		}
	}
	res.Ms = float64(time.Since(start).Microseconds()) / 1000
	return res, nil
}

func printPushBench(w io.Writer, r *pushBenchResult) {
	if r.Idle != nil {
		fmt.Fprintf(w, "idle       %d connections in %.1fs (%.0f/s), %d still open, %d failed\n",
			r.Idle.Connections, r.Idle.Seconds, r.Idle.PerSecond, r.Idle.Open, r.Idle.FailedConnect)
		fmt.Fprintf(w, "           node RSS %.0f MB → %.0f MB: %.0f bytes per connection (Go stacks %.0f, heap %.0f; open-file limit %d)\n",
			r.Idle.RSSBeforeMB, r.Idle.RSSAfterMB, r.Idle.BytesPerConn, r.Idle.StackPerConn, r.Idle.HeapPerConn, r.Idle.NoFileLimit)
	}
	for _, x := range []struct {
		name string
		r    *rateResult
	}{{"rate", r.Rate}, {"max", r.Max}} {
		if x.r == nil {
			continue
		}
		fmt.Fprintf(w, "%-10s %d user agents: %d messages in %.1fs = %.0f/s (target %d/s), %d errors; sender→UA p50 %.2f ms p99 %.2f ms max %.2f ms; node CPU %.0f µs/message\n",
			x.name, x.r.UserAgents, x.r.Sent, x.r.Seconds, x.r.PerSecond, x.r.TargetRate, x.r.Errors, x.r.P50Ms, x.r.P99Ms, x.r.MaxMs, x.r.NodeCPUMicros)
		if x.r.Ceiling != nil {
			fmt.Fprintf(w, "           raw HTTP ceiling %.0f requests/s: messages/ceiling %.2f\n", x.r.Ceiling.PerSecond, x.r.CeilingRatio)
		}
	}
	if r.Drain != nil {
		fmt.Fprintf(w, "drain      %d stored messages received in %.1f ms\n", r.Drain.Received, r.Drain.Ms)
	}
}

// tailBuffer keeps the child's output (bounded) for error messages.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 64<<10 {
		t.b = t.b[len(t.b)-32<<10:]
	}
	return len(p), nil
}

// Tail returns the last n lines.
func (t *tailBuffer) Tail(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(string(t.b), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
