package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/heraldhq/herald/bench"
	"github.com/heraldhq/herald/internal/proctune"
)

// runBenchRelay is `herald bench relay` (not listed: the floor of
// `--steady --floor`, bench.Relay, in a process of its own). It runs with
// serve's runtime settings — Go's monitor thread kept awake (ADR 0040),
// and on PostgreSQL one P while nearly idle (ADR 0037) — so the floor
// differs from a node in herald's work only. It prints "relay listening on
// URL" and serves until its stdin closes (the bench's end, or its death)
// or a signal.
func runBenchRelay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("herald bench relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "receiver base URL (loopback): stored bodies go to its /hook")
	dbURL := fs.String("database-url", "", "store bodies in this PostgreSQL (loopback; a fresh schema, dropped at the end); default a SQLite file in a temporary directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to == "" {
		return errors.New("herald bench relay needs --to")
	}
	// Every flag is checked before KeepSysmonAwake, which starts this
	// program again.
	if err := bench.CheckLoopback(*to); err != nil {
		return err
	}
	if *dbURL != "" {
		if err := checkLoopbackDB(*dbURL, "--database-url"); err != nil {
			return err
		}
	}
	if err := proctune.KeepSysmonAwake(); err != nil {
		fmt.Fprintln(stderr, "bench relay: Go's monitor thread is not kept awake:", err)
	}
	if *dbURL != "" && os.Getenv("GOMAXPROCS") == "" {
		defer proctune.Start(proctune.Config{}).Stop()
	}
	dir, err := os.MkdirTemp("", "herald-bench-relay-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	relay, err := bench.NewRelay(ctx, bench.RelayConfig{To: *to, DatabaseURL: *dbURL, Dir: dir})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	fmt.Fprintf(stdout, "relay listening on http://%s\n", ln.Addr())
	return relay.Serve(ctx, ln)
}

// relayChild is a `herald bench relay` process and its URL.
type relayChild struct {
	*pipeChild
	url string
}

// relayExecutable is the binary startRelay runs: this one (tests set a
// built herald).
var relayExecutable = os.Executable

// startRelay starts this binary's `bench relay` to the receiver at to, on
// PostgreSQL when dbURL is set, and waits for its address.
func startRelay(ctx context.Context, to, dbURL string, stderr io.Writer) (*relayChild, error) {
	exe, err := relayExecutable()
	if err != nil {
		return nil, err
	}
	args := []string{"bench", "relay", "--to", to}
	if dbURL != "" {
		args = append(args, "--database-url", dbURL)
	}
	pc, err := startPipeChild(ctx, exe, stderr, args...)
	if err != nil {
		return nil, err
	}
	c := &relayChild{pipeChild: pc}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pc.out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, pc.out)
	}()
	select {
	case l, ok := <-line:
		u, found := strings.CutPrefix(l, "relay listening on ")
		if !ok || !found {
			c.stop()
			return nil, errors.New("herald bench relay did not start (its errors are above)")
		}
		c.url = u
	case <-time.After(30 * time.Second):
		c.stop()
		return nil, errors.New("herald bench relay did not start within 30 s")
	}
	return c, nil
}
