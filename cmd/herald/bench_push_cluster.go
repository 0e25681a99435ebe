package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/bench"
	"github.com/heraldhq/herald/push"
)

// herald bench push --nodes N: the cluster scenario (bench/push_cluster.go).
// Here: a fresh PostgreSQL database for the run, N `herald serve` nodes on
// it with the same push keys and internal listeners, one client process
// per node (this binary re-executed as `herald bench push-client`, so each
// holds at most one node's share of sockets under its open-file limit),
// the kill and, when the survivors cannot hold the killed node's user
// agents, a replacement node.

// clusterHeadroom is the files a client process keeps beside its user
// agents' sockets (stdio, its runtime's own).
const clusterHeadroom = 64

type pushClusterFlags struct {
	nodes       int
	databaseURL string
	uas         int
	jitter      time.Duration
	settle      time.Duration
	replace     string
	dbPool      int
}

func (c *pushClusterFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&c.nodes, "nodes", 0, "cluster: start this many herald serve nodes (2..16) on --database-url and run the cluster scenario after --scenarios (0: no cluster)")
	fs.StringVar(&c.databaseURL, "database-url", "", "cluster: PostgreSQL server (loopback) for the nodes; the run creates a fresh database herald_bench_<pid> on it and drops it afterwards")
	fs.IntVar(&c.uas, "cluster-uas", 95_000, "cluster: idle user agents spread over the nodes (one client process per node holds its share: at most the open-file limit less 64 each)")
	fs.DurationVar(&c.jitter, "cluster-jitter", 5*time.Second, "cluster: the killed node's user agents each wait a random time up to this before reconnecting (the storm's spread; Firefox first retries 5 s after a drop), then back off from 5 s, doubling, as Firefox does")
	fs.DurationVar(&c.settle, "cluster-settle", 5*time.Minute, "cluster: longest wait for the reconnects after the kill (then up to a minute more for every accepted message)")
	fs.IntVar(&c.dbPool, "cluster-db-pool", 0, "cluster: each node's PostgreSQL pool (pool_max_conns in its --database-url; 0: herald's default, max(4, CPUs))")
	fs.StringVar(&c.replace, "cluster-replace", "auto", "cluster: start a node in place of the killed one: auto (when the survivors' --push-max-conns cannot hold its user agents), always or never")
}

func (c *pushClusterFlags) check() error {
	if c.nodes == 0 {
		return nil
	}
	if c.nodes < 2 || c.nodes > 16 {
		return errors.New("--nodes must be 2..16")
	}
	if c.databaseURL == "" {
		return errors.New("--nodes needs --database-url")
	}
	if err := checkLoopbackDB(c.databaseURL, "--database-url"); err != nil {
		return err
	}
	if c.uas < c.nodes {
		return errors.New("--cluster-uas must be at least --nodes")
	}
	if per := (c.uas + c.nodes - 1) / c.nodes; per > clusterFileLimit()-clusterHeadroom {
		return fmt.Errorf("--cluster-uas %d over %d nodes is %d user agents a client process, over the open-file limit %d less %d: add nodes", c.uas, c.nodes, per, clusterFileLimit(), clusterHeadroom)
	}
	if c.dbPool < 0 || c.dbPool > 64 {
		return errors.New("--cluster-db-pool must be 0..64")
	}
	if c.replace != "auto" && c.replace != "always" && c.replace != "never" {
		return errors.New("--cluster-replace must be auto, always or never")
	}
	return nil
}

// clusterFileLimit is the open-file limit the nodes and client processes
// inherit from this one.
func clusterFileLimit() int {
	if n := fileLimit(); n > 0 {
		return n
	}
	return assumedFileLimit
}

// needsReplacement: whether the survivors' push session caps (derived
// from the file limit as serve derives them) leave too little room for
// the killed node's user agents.
func (c *pushClusterFlags) needsReplacement() bool {
	switch c.replace {
	case "always":
		return true
	case "never":
		return false
	}
	cfg := &config{}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	cfg.flags(fs)
	_ = fs.Parse(nil)
	capacity := resolveConnLimits(cfg, clusterFileLimit()).push
	per := (c.uas + c.nodes - 1) / c.nodes
	return (c.nodes-1)*(capacity-per) < per
}

// runPushCluster runs the cluster scenario and returns its figures.
func runPushCluster(ctx context.Context, f *pushBenchFlags, stderr io.Writer) (*bench.ClusterResult, error) {
	c := &f.cluster
	// The client processes' stderr and the run's notices share stderr:
	// one writer at a time.
	stderr = &lockedWriter{w: stderr}
	exe := f.binary
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	dbURL, drop, err := createBenchDatabase(ctx, c.databaseURL)
	if err != nil {
		return nil, err
	}
	defer drop()
	nodeURL := dbURL
	if c.dbPool > 0 {
		u, _ := url.Parse(dbURL)
		q := u.Query()
		q.Set("pool_max_conns", strconv.Itoa(c.dbPool))
		u.RawQuery = q.Encode()
		nodeURL = u.String()
	}
	keys := push.GenerateKey()
	var nodes []*pushChild
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	start := func(ctx context.Context, addr string) (*pushChild, error) {
		n, err := startPushChildAt(ctx, f, stderr, addr, "--database-url", nodeURL, "--push-crypto-keys", keys, "--internal-listen", freeLoopbackAddr())
		if err == nil {
			nodes = append(nodes, n)
		}
		return n, err
	}
	env := bench.PushClusterEnv{DatabaseURL: dbURL}
	// One node after another, each ready before the next: the first
	// migrates the database.
	for i := range c.nodes {
		n, err := start(ctx, freeLoopbackAddr())
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		env.Nodes = append(env.Nodes, bench.PushNode{Addr: n.addr, Pid: n.cmd.Process.Pid})
	}
	for range c.nodes {
		cl, err := startPipeChild(ctx, exe, stderr, "bench", "push-client")
		if err != nil {
			return nil, err
		}
		defer cl.stop()
		env.Clients = append(env.Clients, bench.PushClientProc{In: cl.in, Out: cl.out})
	}
	env.Kill = func(i int) error {
		n := nodes[i]
		if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return err
		}
		_ = n.cmd.Wait()
		return nil
	}
	// The replacement's port is held until it starts: the run's own
	// outbound connections from 127.0.0.1 could take a port that is
	// merely remembered.
	reserve, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer reserve.Close()
	env.ReplacementAddr = reserve.Addr().String()
	env.StartReplacement = func(ctx context.Context) (bench.PushNode, error) {
		_ = reserve.Close()
		n, err := start(ctx, env.ReplacementAddr)
		if err != nil {
			return bench.PushNode{}, err
		}
		return bench.PushNode{Addr: n.addr, Pid: n.cmd.Process.Pid}, nil
	}
	sources := make([]string, max(f.sources, 1))
	for i := range sources {
		sources[i] = net.IPv4(127, 0, 0, byte(2+i)).String()
	}
	return bench.RunPushCluster(ctx, bench.PushClusterConfig{
		UserAgents: c.uas, Rate: f.rate, Duration: f.duration, Payload: f.payload, Sources: sources,
		Jitter: c.jitter, Settle: c.settle, Replace: c.needsReplacement(), Log: stderr,
	}, env)
}

// freeLoopbackAddr is a loopback address with a port free a moment ago.
func freeLoopbackAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

// createBenchDatabase creates herald_bench_<pid> on the server of raw and
// returns its URL and a func that drops it.
func createBenchDatabase(ctx context.Context, raw string) (string, func(), error) {
	admin, err := pgx.Connect(ctx, raw)
	if err != nil {
		return "", nil, fmt.Errorf("--database-url: %w", err)
	}
	name := fmt.Sprintf("herald_bench_%d", os.Getpid())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		_ = admin.Close(ctx)
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, _ := url.Parse(raw)
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "bench push: drop database %s: %v\n", name, err)
		}
		_ = admin.Close(ctx)
	}
	return u.String(), drop, nil
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// runBenchPushClient is `herald bench push-client` (not listed: the
// cluster scenario's client process).
func runBenchPushClient(ctx context.Context, stdout io.Writer) error {
	raiseNoFile()
	return bench.RunPushClient(ctx, os.Stdin, stdout)
}
