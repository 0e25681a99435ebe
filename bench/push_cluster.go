package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/client"
)

// The cluster scenario (`herald bench push --nodes N`): N herald serve
// nodes on one PostgreSQL with the same push keys, user agents spread
// over them (held by client processes, push_client.go), messages at a
// fixed rate to random user agents through random nodes (so (N−1)/N of
// them are handed from node to node), then kill -9 of one node while the
// messages go on: its user agents reconnect with their uaid to the others,
// and every message a node answered 201 must arrive.

// PushClusterConfig is one run of the cluster scenario.
type PushClusterConfig struct {
	// UserAgents is the idle user agents spread over the nodes; Rate the
	// messages per second sent for Duration before the kill and on
	// during the reconnect storm.
	UserAgents, Rate int
	Duration         time.Duration
	// Payload is the bytes of message body (at least 16: send time and
	// sequence number).
	Payload int
	// Sources are the loopback source addresses the clients dial from.
	Sources []string
	// Jitter spreads the reconnects of the killed node's user agents: each
	// waits a random time up to it before its first attempt.
	Jitter time.Duration
	// Settle bounds the wait for the reconnects after the kill (then up
	// to a minute more for every accepted message to arrive).
	Settle time.Duration
	// Replace starts a node in place of the killed one (as an orchestrator
	// would) before the reconnects, for when the survivors cannot hold
	// the killed node's user agents under their open-file limit.
	Replace bool
	Log     io.Writer
}

// PushClusterEnv is what cmd/herald starts for the scenario: the nodes,
// one client process per node, and the PostgreSQL database they share.
type PushClusterEnv struct {
	Nodes   []PushNode
	Clients []PushClientProc
	// DatabaseURL is the nodes' database, for its statistics (router
	// writes, commits, stored-message size).
	DatabaseURL string
	// Kill kills node i with SIGKILL and waits for it to end.
	Kill func(i int) error
	// ReplacementAddr is where StartReplacement's node listens.
	ReplacementAddr  string
	StartReplacement func(ctx context.Context) (PushNode, error)
}

// PushClientProc is a client process: its stdin and stdout.
type PushClientProc struct {
	In  io.Writer
	Out io.Reader
}

// ClusterResult is the cluster scenario's figures (`--json`: "cluster").
type ClusterResult struct {
	Nodes          int     `json:"nodes"`
	Connections    int64   `json:"connections"`
	FailedConnects int64   `json:"failed_connects"`
	ConnectSeconds float64 `json:"connect_seconds"`
	ConnectPerSec  float64 `json:"connects_per_second"`
	// Database work of the connect storm, per second of it: commits
	// (pg_stat_database.xact_commit), router rows written (push_users
	// inserts and updates) and channel rows (push_channels inserts); and
	// this machine's PostgreSQL CPU as a share of one core.
	ConnectXactPerSec    float64 `json:"connect_commits_per_second"`
	ConnectRouterPerSec  float64 `json:"connect_router_writes_per_second"`
	ConnectChannelPerSec float64 `json:"connect_channel_writes_per_second"`
	ConnectDBCorePct     float64 `json:"connect_db_core_pct"`
	// DBConnections is the nodes' PostgreSQL connections together, read
	// after the connect storm (pg_stat_activity): what max_connections
	// must hold per node.
	DBConnections int64 `json:"db_connections"`
	// The steady phase: messages at TargetRate to random user agents
	// through random nodes; HandedOff is the share sent to a node that did
	// not hold the user agent.
	TargetRate int     `json:"target_rate"`
	Sent       int64   `json:"sent"`
	Errors     int64   `json:"errors"`
	PerSecond  float64 `json:"per_second"`
	HandedOff  float64 `json:"handed_off_share"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	// NodeRSSMB is each node's resident memory with its user agents
	// connected, before the kill; NodeRSSAfterMB after the reconnect storm
	// (0 for the killed node; the replacement last).
	NodeRSSMB      []float64 `json:"node_rss_mb"`
	NodeRSSAfterMB []float64 `json:"node_rss_after_mb"`
	// Handoffs sums the live nodes' herald_push_handoffs_total at the
	// end by "kind/result" (push/ok, notif/retry, notif/dropped, …): how
	// many nudges failed, were retried or given up during the run.
	Handoffs map[string]float64 `json:"handoffs,omitempty"`
	// The kill: node KilledNode's Displaced user agents lost their socket;
	// Reconnected of them said hello again with their uaid (LostUAID were
	// answered with another) within SettleSeconds of the kill, at
	// ReconnectPerSec while the storm lasted.
	KilledNode      int     `json:"killed_node"`
	Replacement     bool    `json:"replacement_node"`
	Displaced       int64   `json:"displaced"`
	Reconnected     int64   `json:"reconnected"`
	LostUAID        int64   `json:"lost_uaid"`
	SettleSeconds   float64 `json:"settle_seconds"`
	ReconnectPerSec float64 `json:"reconnects_per_second"`
	// KillSent is the messages answered 201 from the kill on; KillErrors
	// the sends answered otherwise or failing then.
	KillSent   int64 `json:"kill_sent"`
	KillErrors int64 `json:"kill_errors"`
	// KillP99Ms and KillMaxMs are sender→user agent latencies of what
	// arrived from the kill on: the longest is a message stored for a
	// displaced user agent and drained when it reconnected.
	KillP99Ms float64 `json:"kill_p99_ms"`
	KillMaxMs float64 `json:"kill_max_ms"`
	// ReconnectFailures counts failed reconnect attempts by cause:
	// refused (the replacement not yet listening), rejected (a node at its
	// session cap answered 503), timeout (no hello answer in time), other.
	ReconnectFailures map[string]int64 `json:"reconnect_failures,omitempty"`
	// Lost is the messages answered 201 (steady and kill phases) that
	// never arrived at a user agent connected at the end; Duplicates
	// those that arrived more than once (at least once delivery around
	// the kill). UndeliveredAway is the messages not arrived for user
	// agents still away at the end (AwayAtEnd of them: not reconnected
	// within --cluster-settle); StoredAtEnd the messages in
	// push_messages then, which holds them.
	Lost            int64 `json:"lost"`
	Duplicates      int64 `json:"duplicates"`
	UndeliveredAway int64 `json:"undelivered_away"`
	AwayAtEnd       int64 `json:"away_at_end"`
	StoredAtEnd     int64 `json:"stored_at_end"`
	// Database work of the kill phase: router writes per second of the
	// storm, messages stored (push_messages inserts) and their on-disk
	// cost (table, TOAST and indexes grown, per message stored).
	ReconnectRouterPerSec float64 `json:"reconnect_router_writes_per_second"`
	Stored                int64   `json:"stored"`
	StoredBytesPerMessage float64 `json:"stored_bytes_per_message"`
}

// clusterUA is a user agent as the parent knows it.
type clusterUA struct {
	path string
	node atomic.Int32
	// away: its socket dropped and it has not said hello again yet.
	away atomic.Bool
}

type clusterRun struct {
	cfg PushClusterConfig
	env PushClusterEnv
	uas []*clusterUA // by global index: client c's user agent i is uas[offset[c]+i]

	offsets []int
	up      chan [3]int64 // client, connected, failed

	mu       sync.Mutex
	accepted map[uint64]sendInfo
	received map[uint64]int
	// failKinds counts failed reconnect attempts by cause.
	failKinds map[string]int64

	killAt    atomic.Int64 // unix ns of the kill (max until then)
	steady    Recorder     // received before the kill
	afterKill Recorder     // received from the kill on
	down, re  atomic.Int64
	lostUAID  atomic.Int64
	lastRe    atomic.Int64 // unix ns
}

// RunPushCluster runs the cluster scenario on env.
func RunPushCluster(ctx context.Context, cfg PushClusterConfig, env PushClusterEnv) (*ClusterResult, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	n := len(env.Nodes)
	if n < 2 || len(env.Clients) != n {
		return nil, fmt.Errorf("cluster: %d nodes and %d client processes (need 2 or more, one each)", n, len(env.Clients))
	}
	r := &clusterRun{cfg: cfg, env: env, up: make(chan [3]int64, n), accepted: map[uint64]sendInfo{}, received: map[uint64]int{}, failKinds: map[string]int64{}}
	r.killAt.Store(1<<63 - 1)
	per := make([]int, n)
	for i := range per {
		per[i] = cfg.UserAgents / n
		if i < cfg.UserAgents%n {
			per[i]++
		}
		r.offsets = append(r.offsets, len(r.uas))
		for range per[i] {
			ua := &clusterUA{}
			ua.node.Store(int32(i))
			r.uas = append(r.uas, ua)
		}
	}
	// The readers end when the client processes do (their stdout closes).
	for c, p := range env.Clients {
		go r.readClient(c, p.Out)
	}
	db, err := pgx.Connect(ctx, env.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("cluster: database statistics: %w", err)
	}
	defer db.Close(context.Background())
	res := &ClusterResult{Nodes: n, TargetRate: cfg.Rate}

	// 1. Connect storm: every client connects its node's share at once.
	st0, err := readPGStats(ctx, db)
	if err != nil {
		return nil, err
	}
	cpu0 := postgresCPU()
	start := time.Now()
	for c, p := range env.Clients {
		if err := sendClientCmd(p.In, pushClientCmd{Op: "connect", Addr: env.Nodes[c].Addr, Count: per[c], Sources: cfg.Sources}); err != nil {
			return nil, err
		}
	}
	connected := make([]int64, n)
	for range n {
		select {
		case u := <-r.up:
			connected[u[0]] = u[1]
			res.Connections += u[1]
			res.FailedConnects += u[2]
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	res.ConnectSeconds = time.Since(start).Seconds()
	cpu1 := postgresCPU()
	res.ConnectPerSec = float64(res.Connections) / res.ConnectSeconds
	fmt.Fprintf(cfg.Log, "bench push: %d user agents connected to %d nodes in %.1fs (%d failed)\n", res.Connections, n, res.ConnectSeconds, res.FailedConnects)
	// PostgreSQL publishes a backend's counters up to 10 s after its
	// transactions (pgstat's idle flush): wait before reading them. The
	// nodes' memory settles meanwhile.
	sleepCtx(ctx, 11*time.Second)
	st1, err := readPGStats(ctx, db)
	if err != nil {
		return nil, err
	}
	res.ConnectXactPerSec = float64(st1.xact-st0.xact) / res.ConnectSeconds
	res.ConnectRouterPerSec = float64(st1.users-st0.users) / res.ConnectSeconds
	res.ConnectChannelPerSec = float64(st1.channels-st0.channels) / res.ConnectSeconds
	res.ConnectDBCorePct = 100 * (cpu1 - cpu0) / res.ConnectSeconds
	res.DBConnections = st1.conns
	for _, nd := range env.Nodes {
		res.NodeRSSMB = append(res.NodeRSSMB, nd.rssBytes()/(1<<20))
	}

	// 2. Steady: messages at the rate to random user agents through
	// random nodes.
	live := make([]bool, n)
	for i := range live {
		live[i] = true
	}
	s := r.startSender(ctx, live)
	sleepCtx(ctx, cfg.Duration)
	res.Sent, res.Errors = s.ok.Load(), s.errs.Load()
	res.PerSecond = float64(res.Sent) / cfg.Duration.Seconds()
	if c := s.count.Load(); c > 0 {
		res.HandedOff = float64(s.handed.Load()) / float64(c)
	}

	// 3. kill -9 of the last node while the messages go on.
	k := n - 1
	res.KilledNode, res.Replacement = k, cfg.Replace
	targets := []string{}
	for i, nd := range env.Nodes {
		if i != k {
			targets = append(targets, nd.Addr)
		}
	}
	if cfg.Replace {
		targets = append(targets, env.ReplacementAddr)
	}
	// Every client learns where to go: the killed node's user agents, and
	// any other whose socket drops meanwhile.
	for _, p := range env.Clients {
		if err := sendClientCmd(p.In, pushClientCmd{Op: "targets", Targets: targets, JitterMs: int(cfg.Jitter / time.Millisecond)}); err != nil {
			return nil, err
		}
	}
	okBefore, errsBefore := s.ok.Load(), s.errs.Load()
	st2, err := readPGStats(ctx, db)
	if err != nil {
		return nil, err
	}
	s.setLive(k, false)
	killedAt := time.Now()
	r.killAt.Store(killedAt.UnixNano())
	if err := env.Kill(k); err != nil {
		return nil, fmt.Errorf("cluster: kill node %d: %w", k, err)
	}
	res.Displaced = connected[k] // every user agent of the killed node drops
	var replacement *PushNode
	if cfg.Replace {
		nd, err := env.StartReplacement(ctx)
		if err != nil {
			return nil, fmt.Errorf("cluster: replacement node: %w", err)
		}
		replacement = &nd
		fmt.Fprintf(cfg.Log, "bench push: replacement node on %s %.1fs after the kill\n", nd.Addr, time.Since(killedAt).Seconds())
	}
	deadline := killedAt.Add(cfg.Settle)
	for r.re.Load() < r.down.Load() || r.down.Load() < res.Displaced {
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(cfg.Log, "bench push: reconnects not settled: %d of %d dropped user agents back\n", r.re.Load(), r.down.Load())
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	res.Reconnected, res.LostUAID = r.re.Load(), r.lostUAID.Load()
	if t := r.lastRe.Load(); t > 0 {
		res.SettleSeconds = time.Unix(0, t).Sub(killedAt).Seconds()
		if res.SettleSeconds > 0 {
			res.ReconnectPerSec = float64(res.Reconnected) / res.SettleSeconds
		}
	}
	// Messages go on a little past the storm, then stop; every one
	// answered 201 must arrive.
	sleepCtx(ctx, 2*time.Second)
	s.stop()
	res.KillSent, res.KillErrors = s.ok.Load()-okBefore, s.errs.Load()-errsBefore
	// Stored messages drain in seconds once their user agent is back: a
	// minute more at most.
	drainBy := time.Now().Add(time.Minute)
	for {
		missing := r.missing()
		if missing == 0 {
			break
		}
		if time.Now().After(drainBy) || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	for seq, si := range r.accepted {
		switch c := r.received[seq]; {
		case c == 0 && r.uas[si.ua].away.Load():
			res.UndeliveredAway++
		case c == 0:
			res.Lost++
			if res.Lost <= 10 {
				fmt.Fprintf(cfg.Log, "bench push: lost message %d: user agent %d (node %d at the send), sent through node %d at kill%+.3fs\n",
					seq, si.ua, si.uaNode, si.node, time.Unix(0, si.at).Sub(killedAt).Seconds())
			}
		case c > 1:
			res.Duplicates++
		}
	}
	res.ReconnectFailures = maps.Clone(r.failKinds)
	r.mu.Unlock()
	for _, ua := range r.uas {
		if ua.away.Load() {
			res.AwayAtEnd++
		}
	}
	q := r.steady.Quantiles(0.5, 0.99, 1)
	res.P50Ms, res.P99Ms, res.MaxMs = q[0], q[1], q[2]
	q = r.afterKill.Quantiles(0.99, 1)
	res.KillP99Ms, res.KillMaxMs = q[0], q[1]
	sleepCtx(ctx, 11*time.Second) // pgstat's flush, as above
	st3, err := readPGStats(ctx, db)
	if err != nil {
		return nil, err
	}
	if res.SettleSeconds > 0 {
		res.ReconnectRouterPerSec = float64(st3.users-st2.users) / res.SettleSeconds
	}
	res.Stored = st3.messages - st2.messages
	if err := db.QueryRow(ctx, `SELECT count(*) FROM push_messages`).Scan(&res.StoredAtEnd); err != nil {
		return nil, fmt.Errorf("cluster: stored messages: %w", err)
	}
	if res.Stored > 0 {
		res.StoredBytesPerMessage = float64(st3.messageBytes-st2.messageBytes) / float64(res.Stored)
	}
	for i, nd := range env.Nodes {
		if i == k {
			res.NodeRSSAfterMB = append(res.NodeRSSAfterMB, 0)
			continue
		}
		res.NodeRSSAfterMB = append(res.NodeRSSAfterMB, nd.rssBytes()/(1<<20))
	}
	if replacement != nil {
		res.NodeRSSAfterMB = append(res.NodeRSSAfterMB, replacement.rssBytes()/(1<<20))
	}
	alive := slices.Delete(slices.Clone(env.Nodes), k, k+1)
	if replacement != nil {
		alive = append(alive, *replacement)
	}
	res.Handoffs = handoffCounts(ctx, alive)
	for _, p := range env.Clients {
		_ = sendClientCmd(p.In, pushClientCmd{Op: "quit"})
	}
	return res, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func sendClientCmd(w io.Writer, cmd pushClientCmd) error {
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readClient takes client c's events.
func (r *clusterRun) readClient(c int, out io.Reader) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		a, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "r":
			if len(f) < 3 {
				continue
			}
			lat, _ := strconv.ParseInt(f[2], 10, 64)
			if time.Now().UnixNano() < r.killAt.Load() {
				r.steady.Add(time.Duration(lat))
			} else {
				r.afterKill.Add(time.Duration(lat))
			}
			r.mu.Lock()
			r.received[uint64(a)]++
			r.mu.Unlock()
		case "ep":
			if len(f) == 4 && int(a) >= 0 && r.offsets[c]+int(a) < len(r.uas) {
				r.uas[r.offsets[c]+int(a)].path = f[3]
			}
		case "up":
			if len(f) == 3 {
				b, _ := strconv.ParseInt(f[2], 10, 64)
				r.up <- [3]int64{int64(c), a, b}
			}
		case "down":
			r.down.Add(1)
			r.uas[r.offsets[c]+int(a)].away.Store(true)
		case "fail":
			r.mu.Lock()
			r.failKinds[f[1]]++
			r.mu.Unlock()
		case "re":
			r.re.Add(1)
			r.lastRe.Store(time.Now().UnixNano())
			// The user agent now sits on a survivor or the replacement:
			// none of the first nodes' senders count as its own.
			r.uas[r.offsets[c]+int(a)].node.Store(-1)
			r.uas[r.offsets[c]+int(a)].away.Store(false)
		case "lostuaid":
			r.lostUAID.Add(1)
		}
	}
}

// sendInfo is what the log says of a lost message.
type sendInfo struct {
	ua, node int
	uaNode   int32
	at       int64
}

// missing is the accepted messages not yet received.
func (r *clusterRun) missing() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for seq := range r.accepted {
		if r.received[seq] == 0 {
			n++
		}
	}
	return n
}

// clusterSender sends at the rate, each message to a random connected user
// agent through a random live node, from a pool of workers.
type clusterSender struct {
	r                            *clusterRun
	live                         atomic.Pointer[[]int]
	seq, count, handed, ok, errs atomic.Int64
	cancel                       context.CancelFunc
	wg                           sync.WaitGroup
}

func (s *clusterSender) setLive(i int, alive bool) {
	next := []int{}
	for _, x := range *s.live.Load() {
		if x != i {
			next = append(next, x)
		}
	}
	if alive {
		next = append(next, i)
	}
	s.live.Store(&next)
}

func (r *clusterRun) startSender(ctx context.Context, live []bool) *clusterSender {
	ctx, cancel := context.WithCancel(ctx)
	s := &clusterSender{r: r, cancel: cancel}
	ids := []int{}
	for i, ok := range live {
		if ok {
			ids = append(ids, i)
		}
	}
	s.live.Store(&ids)
	// At most 64 connections to a node: the senders must not take the
	// public connections a node keeps beside its push sessions (its
	// --max-conns less --push-max-conns, 512 by default), or a node at its
	// push cap holds new sessions in its listener's backlog instead of
	// answering them 503.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64, Proxy: nil}, Timeout: 60 * time.Second}
	jobs := make(chan uint64, 1<<16)
	for range 256 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for seq := range jobs {
				s.send(ctx, client, seq)
			}
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(jobs)
		gap := time.Second / time.Duration(max(r.cfg.Rate, 1))
		next := time.Now()
		for ctx.Err() == nil {
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			next = next.Add(gap)
			select {
			case jobs <- uint64(s.seq.Add(1)):
			default: // the workers are all stuck: the count shows it
				s.errs.Add(1)
			}
		}
	}()
	return s
}

func (s *clusterSender) send(ctx context.Context, client *http.Client, seq uint64) {
	r := s.r
	uaIdx := rand.IntN(len(r.uas))
	ua := r.uas[uaIdx]
	live := *s.live.Load()
	if ua.path == "" || len(live) == 0 {
		s.errs.Add(1)
		return
	}
	node := live[rand.IntN(len(live))]
	s.count.Add(1)
	uaNode := ua.node.Load()
	if int32(node) != uaNode {
		s.handed.Add(1)
	}
	body := make([]byte, max(r.cfg.Payload, 16))
	binary.BigEndian.PutUint64(body[8:], seq)
	binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.env.Nodes[node].Addr+ua.path, bytes.NewReader(body))
	req.Header.Set("TTL", "600")
	req.Header.Set("Content-Encoding", "aes128gcm")
	// Accepted before the request: the user agent may receive it before
	// the 201 is read; a send that is not answered 201 is taken back.
	r.mu.Lock()
	r.accepted[seq] = sendInfo{ua: uaIdx, uaNode: uaNode, node: node, at: time.Now().UnixNano()}
	r.mu.Unlock()
	resp, err := client.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusCreated {
		s.errs.Add(1)
		r.mu.Lock()
		delete(r.accepted, seq)
		r.mu.Unlock()
		return
	}
	s.ok.Add(1)
}

func (s *clusterSender) stop() {
	s.cancel()
	s.wg.Wait()
}

type pgStats struct {
	xact, users, channels, messages, messageBytes int64
	// conns is the database's server connections, this one excepted.
	conns int64
}

// readPGStats reads the database's commits, the push tables' rows
// written and push_messages' size on disk.
func readPGStats(ctx context.Context, db *pgx.Conn) (pgStats, error) {
	var s pgStats
	err := db.QueryRow(ctx, `SELECT
		(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
		coalesce((SELECT sum(n_tup_ins + n_tup_upd) FROM pg_stat_user_tables WHERE relname = 'push_users'), 0)::bigint,
		coalesce((SELECT sum(n_tup_ins) FROM pg_stat_user_tables WHERE relname = 'push_channels'), 0)::bigint,
		coalesce((SELECT sum(n_tup_ins) FROM pg_stat_user_tables WHERE relname = 'push_messages'), 0)::bigint,
		coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_stat_user_tables WHERE relname = 'push_messages'), 0)::bigint,
		(SELECT count(*) - 1 FROM pg_stat_activity WHERE datname = current_database())`).
		Scan(&s.xact, &s.users, &s.channels, &s.messages, &s.messageBytes, &s.conns)
	if err != nil {
		return s, fmt.Errorf("cluster: database statistics: %w", err)
	}
	return s, nil
}

// WriteClusterReport writes r as `herald bench push --nodes` prints it.
func WriteClusterReport(w io.Writer, r *ClusterResult) {
	fmt.Fprintf(w, "cluster    %d nodes, %d user agents connected in %.1fs (%.0f/s), %d failed; PostgreSQL %.0f commits/s, %.0f router writes/s, %.0f channel writes/s, %.0f%% of a core\n",
		r.Nodes, r.Connections, r.ConnectSeconds, r.ConnectPerSec, r.FailedConnects, r.ConnectXactPerSec, r.ConnectRouterPerSec, r.ConnectChannelPerSec, r.ConnectDBCorePct)
	fmt.Fprintf(w, "           %d messages at %d/s through random nodes (%.0f%% handed between nodes), %d errors; sender→UA p50 %.2f ms p99 %.2f ms max %.2f ms\n",
		r.Sent, r.TargetRate, 100*r.HandedOff, r.Errors, r.P50Ms, r.P99Ms, r.MaxMs)
	fmt.Fprintf(w, "           node RSS MB %s with the user agents on; %d PostgreSQL connections\n", fmtMBs(r.NodeRSSMB), r.DBConnections)
	repl := ""
	if r.Replacement {
		repl = " (and a replacement node)"
	}
	fmt.Fprintf(w, "kill -9    node %d: %d of %d user agents reconnected to the others%s with their uaid (%d answered another) in %.2fs (%.0f/s, %.0f router writes/s)\n",
		r.KilledNode, r.Reconnected, r.Displaced, repl, r.LostUAID, r.SettleSeconds, r.ReconnectPerSec, r.ReconnectRouterPerSec)
	fmt.Fprintf(w, "           %d messages answered 201 from the kill on (%d errors), sender→UA p99 %.2f ms max %.2f ms then; %d stored (%.0f bytes each on disk)\n",
		r.KillSent, r.KillErrors, r.KillP99Ms, r.KillMaxMs, r.Stored, r.StoredBytesPerMessage)
	if len(r.ReconnectFailures) > 0 {
		kinds := slices.Sorted(maps.Keys(r.ReconnectFailures))
		parts := make([]string, len(kinds))
		for i, k := range kinds {
			parts[i] = fmt.Sprintf("%s %d", k, r.ReconnectFailures[k])
		}
		fmt.Fprintf(w, "           failed reconnect attempts: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "           lost %d, duplicates %d; %d user agents still away at the end with %d messages not yet delivered (%d stored then); node RSS MB %s after the storm\n",
		r.Lost, r.Duplicates, r.AwayAtEnd, r.UndeliveredAway, r.StoredAtEnd, fmtMBs(r.NodeRSSAfterMB))
	if len(r.Handoffs) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Handoffs)) {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, r.Handoffs[k]))
		}
		fmt.Fprintf(w, "           hand-offs (kind/result, live nodes): %s\n", strings.Join(parts, ", "))
	}
}

func fmtMBs(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, " / ")
}

// handoffCounts sums herald_push_handoffs_total{kind,result} over nodes.
func handoffCounts(ctx context.Context, nodes []PushNode) map[string]float64 {
	out := map[string]float64{}
	for _, n := range nodes {
		m, err := client.New("http://"+n.Addr, "").Metrics(ctx)
		if err != nil {
			continue
		}
		for series, v := range m {
			rest, ok := strings.CutPrefix(series, "herald_push_handoffs_total{")
			if !ok {
				continue
			}
			var kind, result string
			for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
				k, val, _ := strings.Cut(kv, "=")
				switch k {
				case "kind":
					kind = strings.Trim(val, `"`)
				case "result":
					result = strings.Trim(val, `"`)
				}
			}
			out[kind+"/"+result] += v
		}
	}
	return out
}
