package bench

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/heraldhq/herald/client"
)

// The Web Push load (`herald bench push`) measures a herald serve's push
// service:
//   - idle: N user agents connected and idle; the node's resident memory
//     growth per connection;
//   - rate: messages at a fixed rate to connected user agents that ack;
//     sender→user-agent latency;
//   - max: as fast as possible; messages/s beside the raw HTTP ceiling
//     measured in the same run;
//   - drain: a user agent reconnecting to stored messages; time until all
//     arrived.

// PushConfig is one run of the Web Push load. cmd/herald fills it from
// `herald bench push`'s flags.
type PushConfig struct {
	// Scenarios is which to run, comma-separated: idle, rate, max, drain.
	Scenarios string
	// IdleConns is the idle scenario's connections, spread over Sources
	// loopback source addresses (127.0.0.2…).
	IdleConns, Sources int
	// UserAgents is the rate and max scenarios' user agents, each with
	// one sender; Rate is the rate scenario's messages per second.
	UserAgents, Rate int
	// Duration is how long rate and max send.
	Duration time.Duration
	// Payload is the bytes of message body.
	Payload int
	// Drain is the drain scenario's stored messages.
	Drain int
	// CeilingMax bounds max's raw HTTP ceiling run (0 skips it).
	CeilingMax time.Duration
	// Log gets the run's notices (the first failed connect).
	Log io.Writer
	// VAPID is how the rate and max senders identify themselves (RFC
	// 8292): "" or "none" (no Authorization), "reuse" (one signed token
	// for the whole run, as herald's own webpush destination and careful
	// application servers do) or "per-message" (a new token each send, as
	// several libraries do by default).
	VAPID string
}

// VAPIDModes are PushConfig.VAPID's values.
var VAPIDModes = []string{"none", "reuse", "per-message"}

// benchVAPID signs the bench senders' VAPID tokens with one key.
type benchVAPID struct {
	key  *ecdsa.PrivateKey
	pub  string // base64url of the uncompressed public key
	mode string
	tok  atomic.Pointer[string]
}

func newBenchVAPID(mode string) (*benchVAPID, error) {
	if mode == "" || mode == "none" {
		return nil, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := key.PublicKey.Bytes()
	if err != nil {
		return nil, err
	}
	return &benchVAPID{key: key, pub: base64.RawURLEncoding.EncodeToString(pub), mode: mode}, nil
}

// header is the Authorization value for a send to endpoint.
func (v *benchVAPID) header(endpoint string) (string, error) {
	if v.mode == "reuse" {
		if t := v.tok.Load(); t != nil {
			return *t, nil
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"aud": u.Scheme + "://" + u.Host, "exp": time.Now().Add(12 * time.Hour).Unix(), "sub": "mailto:bench@example.invalid",
	}).SignedString(v.key)
	if err != nil {
		return "", err
	}
	h := "vapid t=" + tok + ", k=" + v.pub
	if v.mode == "reuse" {
		v.tok.Store(&h)
	}
	return h, nil
}

// PushNode is the herald serve under load: its address, and its process,
// whose memory and CPU are read from /proc.
type PushNode struct {
	Addr string
	Pid  int
}

func (n PushNode) rssBytes() float64   { return rssBytes(strconv.Itoa(n.Pid)) }
func (n PushNode) cpuSeconds() float64 { return cpuSeconds(strconv.Itoa(n.Pid)) }

// goMemory reads the node's Go stack and heap in use from its /metrics.
func (n PushNode) goMemory(ctx context.Context) (stack, heap float64) {
	m, err := client.New("http://"+n.Addr, "").Metrics(ctx)
	if err != nil {
		return 0, 0
	}
	return m["go_memstats_stack_inuse_bytes"], m["go_memstats_heap_inuse_bytes"]
}

// RunPush runs cfg's scenarios, in order, against node.
func RunPush(ctx context.Context, cfg PushConfig, node PushNode) (*PushResult, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	res := &PushResult{}
	var err error
	for _, sc := range strings.Split(cfg.Scenarios, ",") {
		if ctx.Err() != nil {
			break
		}
		switch strings.TrimSpace(sc) {
		case "idle":
			res.Idle, err = benchIdle(ctx, node, &cfg)
		case "rate":
			res.Rate, err = benchRate(ctx, node, &cfg, cfg.Rate)
		case "max":
			res.Max, err = benchRate(ctx, node, &cfg, 0)
			if err == nil && cfg.CeilingMax > 0 {
				var c CeilingResult
				c, err = pushCeiling(ctx, &cfg)
				res.Max.Ceiling = &c
				if c.PerSecond > 0 {
					res.Max.CeilingRatio = res.Max.PerSecond / c.PerSecond
					if res.Max.BenchCPUMicros > 0 {
						res.Max.CeilingRatioBound = c.CPUMicros / res.Max.BenchCPUMicros
					}
				}
			}
		case "drain":
			res.Drain, err = benchDrain(ctx, node, &cfg)
		case "":
		default:
			return nil, fmt.Errorf("unknown scenario %q", sc)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc, err)
		}
	}
	return res, nil
}

// PushResult is what `herald bench push --json` prints and WritePushReport
// renders; a scenario not run is nil.
type PushResult struct {
	Idle  *IdleResult  `json:"idle,omitempty"`
	Rate  *RateResult  `json:"rate,omitempty"`
	Max   *RateResult  `json:"max,omitempty"`
	Drain *DrainResult `json:"drain,omitempty"`
	// Cluster is `herald bench push --nodes`'s scenario (push_cluster.go).
	Cluster *ClusterResult `json:"cluster,omitempty"`
}

// IdleResult is the idle scenario's figures.
type IdleResult struct {
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

// RateResult is the rate or max scenario's figures.
type RateResult struct {
	UserAgents int `json:"user_agents"`
	// VAPID is how the senders identified themselves (PushConfig.VAPID).
	VAPID      string  `json:"vapid,omitempty"`
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
	NodeCPUMicros float64 `json:"node_cpu_us_per_message"`
	// BenchCPUMicros is the bench process's own CPU per message: the
	// senders' HTTP requests and the user agents' frame reads and acks.
	BenchCPUMicros float64        `json:"bench_cpu_us_per_message"`
	Ceiling        *CeilingResult `json:"ceiling,omitempty"`
	CeilingRatio   float64        `json:"ceiling_ratio,omitempty"`
	// CeilingRatioBound is the ratio a node that cost no CPU at all would
	// reach when the machine's cores are the limit of both runs: the
	// ceiling's CPU per request (its client and server) over the bench's
	// own CPU per message here. On a machine whose cores the bench shares
	// with the node, CeilingRatio cannot exceed it.
	CeilingRatioBound float64 `json:"ceiling_ratio_bound,omitempty"`
	// Machine is this machine's CPU during the run (machine.go).
	Machine *MachineUsage `json:"machine,omitempty"`
}

// DrainResult is the drain scenario's figures.
type DrainResult struct {
	Messages int     `json:"messages"`
	Received int     `json:"received"`
	Ms       float64 `json:"ms"`
}

// benchUA is a user agent of the
type benchUA struct {
	ws       *websocket.Conn
	uaid     string
	endpoint string
	chid     string
}

var benchDialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024}

func dialBenchUA(ctx context.Context, addr, uaid string, register bool, d *websocket.Dialer) (*benchUA, error) {
	ws, _, err := d.DialContext(ctx, "ws://"+addr+"/", nil) //nolint:bodyclose // the dialer has read the handshake response; its body is empty
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
	if err := ws.ReadJSON(&r); err != nil {
		_ = ws.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	if r["messageType"] != "hello" {
		_ = ws.Close()
		return nil, fmt.Errorf("hello: answered %v", r)
	}
	ua.uaid, _ = r["uaid"].(string)
	if register {
		ua.chid = fmt.Sprintf("%08x-0000-4000-8000-%s", time.Now().UnixNano()&0xffffffff, ua.uaid[:12])
		if err := ws.WriteJSON(map[string]any{"messageType": "register", "channelID": ua.chid}); err != nil {
			_ = ws.Close()
			return nil, err
		}
		if err := ws.ReadJSON(&r); err != nil {
			_ = ws.Close()
			return nil, fmt.Errorf("register: %w", err)
		}
		if r["messageType"] != "register" {
			_ = ws.Close()
			return nil, fmt.Errorf("register: answered %v", r)
		}
		ua.endpoint, _ = r["pushEndpoint"].(string)
	}
	_ = ws.SetReadDeadline(time.Time{})
	return ua, nil
}

func benchIdle(ctx context.Context, c PushNode, f *PushConfig) (*IdleResult, error) {
	// A warm-up connection, then the baseline.
	if ua, err := dialBenchUA(ctx, c.Addr, "", false, benchDialer); err == nil {
		_ = ua.ws.Close()
	}
	time.Sleep(time.Second)
	res := &IdleResult{Connections: f.IdleConns, RSSBeforeMB: c.rssBytes() / (1 << 20)}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		res.NoFileLimit = lim.Cur
	}
	stack0, heap0 := c.goMemory(ctx)
	dialers := make([]*websocket.Dialer, max(f.Sources, 1))
	for i := range dialers {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}
		nd := &net.Dialer{LocalAddr: local, Timeout: 10 * time.Second}
		dialers[i] = &websocket.Dialer{NetDialContext: nd.DialContext, HandshakeTimeout: 30 * time.Second, ReadBufferSize: 256, WriteBufferSize: 256}
	}
	conns := make([]*websocket.Conn, f.IdleConns)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= f.IdleConns || ctx.Err() != nil {
					return
				}
				ua, err := dialBenchUA(ctx, c.Addr, "", false, dialers[i%len(dialers)])
				if err != nil {
					if failed.Add(1) == 1 {
						fmt.Fprintf(f.Log, "bench push: connect failed: %v\n", err)
					}
					continue
				}
				conns[i] = ua.ws
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.PerSecond = float64(f.IdleConns) / res.Seconds
	res.FailedConnect = failed.Load()
	// Let the node settle (GC) before reading its memory.
	time.Sleep(3 * time.Second)
	res.RSSAfterMB = c.rssBytes() / (1 << 20)
	stack1, heap1 := c.goMemory(ctx)
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
	opened := f.IdleConns - int(res.FailedConnect)
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
func benchRate(ctx context.Context, c PushNode, f *PushConfig, rate int) (*RateResult, error) {
	uas := make([]*benchUA, f.UserAgents)
	for i := range uas {
		ua, err := dialBenchUA(ctx, c.Addr, "", true, benchDialer)
		if err != nil {
			return nil, err
		}
		uas[i] = ua
		defer ua.ws.Close()
	}
	res := &RateResult{UserAgents: f.UserAgents, TargetRate: rate}
	var lat Recorder
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
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: f.UserAgents, Proxy: nil}, Timeout: 30 * time.Second}
	body := make([]byte, f.Payload)
	vapid, err := newBenchVAPID(f.VAPID)
	if err != nil {
		return nil, err
	}
	res.VAPID = f.VAPID
	var sent atomic.Int64
	// At a fixed rate each sender has its own schedule: sender i sends at
	// start + i·gap + k·uas·gap, gap = 1s/rate. A sender that falls behind
	// sends at once (its latency is measured from the actual send).
	var gap time.Duration
	if rate > 0 {
		gap = time.Second / time.Duration(rate)
	}
	end := time.Now().Add(f.Duration)
	cpu0, self0, m0 := c.cpuSeconds(), processCPU(), readMachineTicks()
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
				if vapid != nil {
					h, err := vapid.header(ua.endpoint)
					if err != nil {
						errs.Add(1)
						continue
					}
					req.Header.Set("Authorization", h)
				}
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
		res.BenchCPUMicros = (processCPU() - self0) * 1e6 / float64(res.Sent)
		res.Machine = usageSince(m0, readMachineTicks())
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
func pushCeiling(ctx context.Context, f *PushConfig) (CeilingResult, error) {
	recv, err := NewReceiver(ReceiverConfig{})
	if err != nil {
		return CeilingResult{}, err
	}
	defer recv.Close()
	return Ceiling(ctx, recv, make([]byte, f.Payload), f.UserAgents, 1<<40, f.CeilingMax)
}

// benchDrain stores messages for a disconnected user agent, then times its
// reconnect until every message arrived (acking each).
func benchDrain(ctx context.Context, c PushNode, f *PushConfig) (*DrainResult, error) {
	ua, err := dialBenchUA(ctx, c.Addr, "", true, benchDialer)
	if err != nil {
		return nil, err
	}
	_ = ua.ws.Close()
	time.Sleep(100 * time.Millisecond) // the session's teardown clears the router record
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range f.Drain {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ua.endpoint, strings.NewReader(fmt.Sprintf("stored-%04d-%s", i, strings.Repeat("x", f.Payload))))
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
	res := &DrainResult{Messages: f.Drain}
	start := time.Now()
	again, err := dialBenchUA(ctx, c.Addr, ua.uaid, false, benchDialer)
	if err != nil {
		return nil, err
	}
	defer again.ws.Close()
	_ = again.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for res.Received < f.Drain {
		var n map[string]any
		if err := again.ws.ReadJSON(&n); err != nil {
			return res, fmt.Errorf("after %d of %d: %w", res.Received, f.Drain, err)
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

// WritePushReport writes r as `herald bench push` prints it.
func WritePushReport(w io.Writer, r *PushResult) {
	if r.Idle != nil {
		fmt.Fprintf(w, "idle       %d connections in %.1fs (%.0f/s), %d still open, %d failed\n",
			r.Idle.Connections, r.Idle.Seconds, r.Idle.PerSecond, r.Idle.Open, r.Idle.FailedConnect)
		fmt.Fprintf(w, "           node RSS %.0f MB → %.0f MB: %.0f bytes per connection (Go stacks %.0f, heap %.0f; open-file limit %d)\n",
			r.Idle.RSSBeforeMB, r.Idle.RSSAfterMB, r.Idle.BytesPerConn, r.Idle.StackPerConn, r.Idle.HeapPerConn, r.Idle.NoFileLimit)
	}
	for _, x := range []struct {
		name string
		r    *RateResult
	}{{"rate", r.Rate}, {"max", r.Max}} {
		if x.r == nil {
			continue
		}
		vapid := ""
		if x.r.VAPID != "" && x.r.VAPID != "none" {
			vapid = " (VAPID " + x.r.VAPID + ")"
		}
		fmt.Fprintf(w, "%-10s %d user agents%s: %d messages in %.1fs = %.0f/s (target %d/s), %d errors; sender→UA p50 %.2f ms p99 %.2f ms max %.2f ms; node CPU %.0f µs/message",
			x.name, x.r.UserAgents, vapid, x.r.Sent, x.r.Seconds, x.r.PerSecond, x.r.TargetRate, x.r.Errors, x.r.P50Ms, x.r.P99Ms, x.r.MaxMs, x.r.NodeCPUMicros)
		if x.r.BenchCPUMicros > 0 {
			fmt.Fprintf(w, ", bench %.0f µs/message", x.r.BenchCPUMicros)
		}
		fmt.Fprintln(w)
		if m := x.r.Machine; m != nil {
			fmt.Fprintf(w, "           machine %.0f%% busy, %.0f%% steal, %.0f%% idle (all cores)\n", m.BusyPct, m.StealPct, m.IdlePct)
		}
		if c := x.r.Ceiling; c != nil {
			fmt.Fprintf(w, "           raw HTTP ceiling %.0f requests/s: messages/ceiling %.2f", c.PerSecond, x.r.CeilingRatio)
			if c.CPUMicros > 0 && x.r.CeilingRatioBound > 0 {
				fmt.Fprintf(w, "; %.0f µs of CPU a request (client and server), so a node costing nothing would reach %.2f", c.CPUMicros, x.r.CeilingRatioBound)
			}
			fmt.Fprintln(w)
		}
	}
	if r.Drain != nil {
		fmt.Fprintf(w, "drain      %d stored messages received in %.1f ms\n", r.Drain.Received, r.Drain.Ms)
	}
	if r.Cluster != nil {
		WriteClusterReport(w, r.Cluster)
	}
}
