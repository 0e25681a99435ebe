package main

import (
	"context"
	"errors"
	"flag"
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
	"syscall"
	"time"

	"github.com/heraldhq/herald/bench"
)

// herald bench push measures the Web Push service of a herald child
// process (a fresh `herald serve` on SQLite, so its memory is its own);
// the scenarios are package bench's (bench/push.go). Here: the flags, the
// child and printing.

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
	vapid      string
	cluster    pushClusterFlags
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
	fs.StringVar(&f.vapid, "vapid", "none", "rate, max: how senders sign (RFC 8292): none, reuse (one token for the run, as herald's webpush destination does) or per-message (a new token each send)")
	fs.IntVar(&f.drain, "drain", 150, "drain: stored messages the user agent reconnects to (at most --push-msg-limit, 150)")
	fs.DurationVar(&f.ceilingMax, "ceiling-time", 5*time.Second, "max: longest raw HTTP ceiling run (0 skips it)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object instead of the report")
	fs.BoolVar(&f.keep, "keep", false, "keep the child's data directory")
	fs.StringVar(&f.extraServe, "serve-flags", "", "extra flags for the child herald serve, space-separated")
	fs.StringVar(&f.binary, "herald-binary", "", "herald binary to run as the child, the cluster's nodes and client processes (default: this one)")
	f.cluster.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if !slices.Contains(bench.VAPIDModes, f.vapid) {
		return fmt.Errorf("--vapid must be one of %s", strings.Join(bench.VAPIDModes, ", "))
	}
	if f.payload < 16 || f.payload > 4096 {
		return errors.New("--payload must be 16..4096")
	}
	raiseNoFile()
	if err := f.cluster.check(); err != nil {
		return err
	}
	res := &bench.PushResult{}
	if strings.TrimSpace(f.scenarios) != "" {
		child, err := startPushChild(ctx, &f, stderr)
		if err != nil {
			return err
		}
		res, err = bench.RunPush(ctx, bench.PushConfig{
			Scenarios: f.scenarios, IdleConns: f.idleConns, Sources: f.sources, UserAgents: f.uas, Rate: f.rate,
			Duration: f.duration, Payload: f.payload, Drain: f.drain, CeilingMax: f.ceilingMax, Log: stderr, VAPID: f.vapid,
		}, bench.PushNode{Addr: child.addr, Pid: child.cmd.Process.Pid})
		child.stop()
		if err != nil {
			return err
		}
	}
	if f.cluster.nodes > 0 {
		c, err := runPushCluster(ctx, &f, stderr)
		if err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		res.Cluster = c
	}
	return writeBenchResult(stdout, f.jsonOut, res, func(w io.Writer) { bench.WritePushReport(w, res) })
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return startPushChildAt(ctx, f, stderr, addr)
}

// startPushChildAt starts a herald serve on addr with the bench's flags
// and extra (before --serve-flags), and waits until it is ready.
func startPushChildAt(ctx context.Context, f *pushBenchFlags, stderr io.Writer, addr string, extra ...string) (*pushChild, error) {
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
	// The bench's clients come from eight loopback addresses (no
	// per-address session cap), register all at once (no per-address or
	// node register limit), drive one endpoint far beyond a fair sender's
	// --push-send-rate and drain stores more than one channel's cap: the
	// abuse caps are off unless --serve-flags sets them.
	args := []string{"serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--dev", "--api-token", "bench-token", "--log-level", "warn",
		"--push-max-conns-per-ip", "0", "--push-register-ip-rate", "0", "--push-register-node-rate", "0",
		"--push-send-rate", "0", "--push-max-messages-per-channel", "0", "--push-max-messages-per-uaid", "0"}
	args = append(args, extra...)
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
	waitOrKill(c.cmd)
	if !c.keep {
		_ = os.RemoveAll(c.dir)
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
