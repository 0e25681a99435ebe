package source

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Manager defaults.
const (
	// DefaultPoll is how often a node looks for changed sources and
	// connections, and renews the leases of its ordered sources.
	DefaultPoll = 2 * time.Second
	// DefaultReportInterval is how often a node writes what changed in its
	// sources' status; an unchanged status is rewritten every
	// reportHeartbeat so the row stays live (herald.SourceNodeStale).
	DefaultReportInterval = 2 * time.Second
	reportHeartbeat       = 10 * time.Second
	// DefaultLeaseTTL is how long an ordered source's lease lasts without
	// renewal: a node that died without releasing it holds it this long.
	DefaultLeaseTTL = 15 * time.Second
	// DefaultDialTimeout bounds one dial of a consumer.
	DefaultDialTimeout = 10 * time.Second
)

// Connections resolves a source's connection with its URL readable
// (destination.Cache implements it).
type Connections interface {
	ConnectionResolve(ctx context.Context, name string) (*herald.Connection, error)
}

// Observer receives what sources consume (metrics).
type Observer interface {
	// ObserveSourceConsumed counts messages that became events (stored
	// includes duplicates) and the duplicates among them.
	ObserveSourceConsumed(source string, stored, duplicates int)
	// ObserveSourceRejected counts one rejected message.
	ObserveSourceRejected(source, reason string)
}

// NopObserver observes nothing.
type NopObserver struct{}

func (NopObserver) ObserveSourceConsumed(string, int, int) {}
func (NopObserver) ObserveSourceRejected(string, string)   {}

// Config configures a Manager.
type Config struct {
	// Store keeps the sources, their status and leases (required).
	Store store.SourceStore
	// Connections resolves connections (required).
	Connections Connections
	// Dialers opens consumers by source type (required).
	Dialers *Dialers
	// Publisher commits events (required).
	Publisher Publisher
	// Decode validates events by the API's rules (required).
	Decode DecodeFunc
	// Node is this node's id (required).
	Node string
	// MaxBody caps a message body (default DefaultMaxBody).
	MaxBody int
	// Poll, ReportInterval, LeaseTTL, DialTimeout, BackoffMin and
	// BackoffMax default to the constants of the same names.
	Poll, ReportInterval, LeaseTTL, DialTimeout time.Duration
	BackoffMin, BackoffMax                      time.Duration
	Observer                                    Observer
	Logger                                      *slog.Logger
}

// Manager runs this node's share of every enabled source: a runner per
// source (competing consumers), or per ordered source whose lease this
// node holds. It restarts a runner when its source or connection changes
// and stops it when the source is disabled or deleted.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	runners map[string]*runner // by source name
	// defs are the last definitions seen, by name (compared to restart a
	// runner), and srcs the same sources parsed.
	defs    map[string]string
	srcs    map[string]*herald.Source
	version int64
	loaded  bool
	// standby marks ordered sources another node holds; disabled the
	// disabled ones (both reported with that state).
	standby  map[string]*stats
	lastSent map[string]time.Time
	// kick asks Run to reload the sources now (Kick).
	kick chan struct{}
}

// New returns a Manager; Run runs it.
func New(cfg Config) *Manager {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.ReportInterval <= 0 {
		cfg.ReportInterval = DefaultReportInterval
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(DefaultBackoffMax, cfg.BackoffMin)
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, runners: map[string]*runner{}, defs: map[string]string{}, srcs: map[string]*herald.Source{},
		standby: map[string]*stats{}, lastSent: map[string]time.Time{}, kick: make(chan struct{}, 1)}
}

// Run manages the sources until ctx ends, then stops every runner (each
// finishes the batch it holds: committed events are settled), releases
// its leases and writes a last report.
func (m *Manager) Run(ctx context.Context) error {
	poll := time.NewTicker(m.cfg.Poll)
	defer poll.Stop()
	report := time.NewTicker(m.cfg.ReportInterval)
	defer report.Stop()
	m.reconcile(ctx)
	for {
		select {
		case <-ctx.Done():
			m.stopAll()
			m.report(context.Background(), true)
			return ctx.Err()
		case <-poll.C:
			m.reconcile(ctx)
		case <-m.kick:
			m.reconcile(ctx)
			// Report the new state soon rather than at the next tick.
			report.Reset(m.cfg.ReportInterval / 4)
		case <-report.C:
			m.report(ctx, false)
			report.Reset(m.cfg.ReportInterval)
		}
	}
}

// Kick makes Run reload the sources now instead of at its next poll: the
// API calls it on this node after a source changed. It never blocks.
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// reconcile loads the sources when their version changed and brings the
// runners in line: started, restarted on a changed source or connection,
// stopped when disabled, deleted or (ordered) the lease is lost.
func (m *Manager) reconcile(ctx context.Context) {
	v, err := m.cfg.Store.SourcesVersion(ctx)
	if err != nil {
		m.cfg.Logger.Warn("sources: reading the sources version failed", "error", err)
		return
	}
	if !m.loaded || v != m.version {
		res, err := m.cfg.Store.SourceList(ctx, &store.SourceListParams{})
		if err != nil {
			m.cfg.Logger.Warn("sources: listing sources failed", "error", err)
			return
		}
		m.loaded, m.version = true, v
		m.apply(ctx, res.Sources)
	}
	m.renew(ctx)
}

// apply sets the wanted sources.
func (m *Manager) apply(ctx context.Context, sources []*herald.Source) {
	seen := map[string]bool{}
	for _, src := range sources {
		seen[src.Name] = true
		def := definition(src)
		m.mu.Lock()
		r := m.runners[src.Name]
		old := m.defs[src.Name]
		m.defs[src.Name], m.srcs[src.Name] = def, src
		m.mu.Unlock()
		if r != nil && old != def {
			m.stop(src.Name)
			r = nil
		}
		if !src.Enabled {
			m.mark(src.Name, herald.SourceDisabled)
			m.releaseLease(ctx, src)
			continue
		}
		if r == nil && !src.Ordered {
			m.start(ctx, src)
		}
	}
	m.mu.Lock()
	var gone []string
	for name := range m.defs {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	for _, name := range gone {
		delete(m.defs, name)
		delete(m.srcs, name)
		delete(m.standby, name)
		delete(m.lastSent, name)
	}
	m.mu.Unlock()
	for _, name := range gone {
		m.stop(name)
	}
}

// renew handles ordered sources' leases and connection changes of the
// running sources.
func (m *Manager) renew(ctx context.Context) {
	m.mu.Lock()
	var ordered []*herald.Source
	for _, src := range m.srcs {
		if src.Enabled && src.Ordered {
			ordered = append(ordered, src)
		}
	}
	running := make([]*runner, 0, len(m.runners))
	for _, r := range m.runners {
		running = append(running, r)
	}
	m.mu.Unlock()

	for _, src := range ordered {
		held, err := m.cfg.Store.SourceLeaseAcquire(ctx, &store.SourceLeaseParams{Source: src.Name,
			Node: m.cfg.Node, TTL: m.cfg.LeaseTTL, Now: now()})
		if err != nil {
			m.cfg.Logger.Warn("sources: renewing a lease failed", "source", src.Name, "error", err)
			// Not renewed: stop before the lease may expire under us.
			held = false
		}
		m.mu.Lock()
		r := m.runners[src.Name]
		m.mu.Unlock()
		switch {
		case held && r == nil:
			m.start(ctx, src)
		case !held && r != nil:
			m.stop(src.Name)
			m.mark(src.Name, herald.SourceStandby)
		case !held:
			m.mark(src.Name, herald.SourceStandby)
		}
	}

	// A connection whose URL or settings changed: redial.
	for _, r := range running {
		c, err := m.cfg.Connections.ConnectionResolve(ctx, r.src.Connection)
		if err != nil {
			continue // the runner reports it on its next dial
		}
		m.mu.Lock()
		stamp := r.conn
		m.mu.Unlock()
		if stamp.url != "" && (stamp.url != c.URL || !stamp.updated.Equal(c.UpdatedAt)) {
			m.cfg.Logger.Info("sources: connection changed; reconnecting", "source", r.src.Name, "connection", c.Name)
			src := r.src
			m.stop(src.Name)
			m.start(ctx, src)
		}
	}
}

// start runs a runner for src (no-op if one runs).
func (m *Manager) start(ctx context.Context, src *herald.Source) {
	conv, err := NewConverter(src, m.cfg.Decode, m.cfg.MaxBody)
	st := m.statsFor(src.Name)
	if err != nil {
		// The API compiles mappings before storing them; a stored one that
		// no longer compiles (limits tightened since) cannot run.
		st.setState(herald.SourceFailed, "mapping: "+herald.CleanLine(err.Error(), 300))
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runners[src.Name] != nil {
		return
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &runner{m: m, src: src, conv: conv, stats: st, cancel: cancel, done: make(chan struct{})}
	m.runners[src.Name] = r
	delete(m.standby, src.Name)
	go r.run(rctx)
}

// statsFor returns the stats a source's runner should continue: those of
// the runner it replaces, or of its standby/disabled marker.
func (m *Manager) statsFor(name string) *stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.standby[name]; st != nil {
		return st
	}
	return &stats{}
}

// stop stops a source's runner and waits for it; its stats stay to be
// reported (as a standby marker until something else replaces them).
func (m *Manager) stop(name string) {
	m.mu.Lock()
	r := m.runners[name]
	delete(m.runners, name)
	if _, known := m.defs[name]; r != nil && known {
		m.standby[name] = r.stats
	}
	m.mu.Unlock()
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
	if r.src.Ordered {
		m.releaseLease(context.Background(), r.src)
	}
}

// mark records state for a source without a runner.
func (m *Manager) mark(name, state string) {
	m.mu.Lock()
	st := m.standby[name]
	if st == nil {
		st = &stats{}
		m.standby[name] = st
	}
	m.mu.Unlock()
	st.setState(state, "")
}

func (m *Manager) releaseLease(ctx context.Context, src *herald.Source) {
	if !src.Ordered {
		return
	}
	if err := m.cfg.Store.SourceLeaseRelease(ctx, &store.SourceLeaseParams{Source: src.Name, Node: m.cfg.Node, Now: now()}); err != nil {
		m.cfg.Logger.Warn("sources: releasing a lease failed", "source", src.Name, "error", err)
	}
}

func (m *Manager) setStamp(r *runner, s connStamp) {
	m.mu.Lock()
	r.conn = s
	m.mu.Unlock()
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	names := make([]string, 0, len(m.runners))
	for name := range m.runners {
		names = append(names, name)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() { defer wg.Done(); m.stop(name) }()
	}
	wg.Wait()
}

// report writes each source's status deltas: when changed, and every
// reportHeartbeat regardless; all of them when final.
func (m *Manager) report(ctx context.Context, final bool) {
	m.mu.Lock()
	all := map[string]*stats{}
	for name, st := range m.standby {
		all[name] = st
	}
	for name, r := range m.runners {
		all[name] = r.stats
	}
	m.mu.Unlock()
	t := now()
	for name, st := range all {
		rep := st.take()
		m.mu.Lock()
		last := m.lastSent[name]
		m.mu.Unlock()
		if !rep.changed && !final && t.Sub(last) < reportHeartbeat {
			continue
		}
		if rep.state == "" {
			rep.state = herald.SourceConnecting
		}
		err := m.cfg.Store.SourceReport(ctx, &store.SourceReportParams{Source: name, Node: m.cfg.Node,
			State: rep.state, Consumed: rep.consumed, Duplicates: rep.dups, Rejected: rep.rejected,
			LastError: rep.lastError, Pending: rep.pending, Rejects: rep.rejects, Now: t})
		if err != nil {
			st.putBack(rep)
			m.cfg.Logger.Warn("sources: writing the status failed", "source", name, "error", err)
			continue
		}
		m.mu.Lock()
		m.lastSent[name] = t
		m.mu.Unlock()
	}
}

// definition is the text a source is compared by: any change restarts
// its runner.
func definition(src *herald.Source) string {
	b, _ := json.Marshal(src)
	return string(b)
}
