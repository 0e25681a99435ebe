package metrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/push"
	"github.com/heraldhq/herald/store"
)

// PushObserver turns the Web Push service's measurements into Prometheus
// series. It implements push.Observer.
//
// Series:
//
//	herald_push_connected_user_agents            user agents in session on this node
//	herald_push_messages_total{outcome,errno}    endpoint requests by outcome (direct, stored, dropped_ttl0, rejected; errno for rejected)
//	herald_push_acks_total{code}                 acks from user agents by code (100, 101, 102)
//	herald_push_nacks_total{code}                nacks by code (301, 302, 303)
//	herald_push_handoffs_total{kind,result}      node-to-node hand-offs (kind push or notif; result ok, not_here, error; for notif also retry, dropped, given_up)
//	herald_push_delivery_seconds                 endpoint receipt → frame written to the user agent
//
// The stored backlog is herald_push_stored_messages (NewPushStatsCollector).
type PushObserver struct {
	connected prometheus.Gauge
	messages  *prometheus.CounterVec
	acks      *prometheus.CounterVec
	nacks     *prometheus.CounterVec
	handoffs  *prometheus.CounterVec
	latency   prometheus.Histogram
}

var _ push.Observer = (*PushObserver)(nil)

// NewPushObserver creates the series and registers them on reg.
func NewPushObserver(reg prometheus.Registerer) *PushObserver {
	o := &PushObserver{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_push_connected_user_agents",
			Help: "Web Push user agents in session on this node.",
		}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_push_messages_total",
			Help: "Web Push messages received by the endpoint, by outcome (direct, stored, dropped_ttl0, rejected) and errno (rejected only; 0 otherwise).",
		}, []string{"outcome", "errno"}),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_push_acks_total",
			Help: "Acks from user agents, by code (100 delivered, 101 decryption error, 102 not delivered).",
		}, []string{"code"}),
		nacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_push_nacks_total",
			Help: "Nacks from user agents, by code (301, 302, 303).",
		}, []string{"code"}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_push_handoffs_total",
			Help: "Node-to-node hand-offs, by kind (push, notif) and result (ok, not_here, error).",
		}, []string{"kind", "result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_push_delivery_seconds",
			Help:    "Time from the endpoint's receipt of a message to its frame written to a connected user agent.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
		}),
	}
	reg.MustRegister(o.connected, o.messages, o.acks, o.nacks, o.handoffs, o.latency)
	for _, outcome := range []string{"direct", "stored", "dropped_ttl0"} {
		o.messages.WithLabelValues(outcome, "0")
	}
	o.acks.WithLabelValues("100")
	return o
}

func (o *PushObserver) ObserveConnected(delta int) { o.connected.Add(float64(delta)) }

func (o *PushObserver) ObserveMessageIn(outcome string, errno int) {
	o.messages.WithLabelValues(outcome, strconv.Itoa(errno)).Inc()
}

func (o *PushObserver) ObserveAck(code int)  { o.acks.WithLabelValues(strconv.Itoa(code)).Inc() }
func (o *PushObserver) ObserveNack(code int) { o.nacks.WithLabelValues(strconv.Itoa(code)).Inc() }

func (o *PushObserver) ObserveHandoff(kind, result string) {
	o.handoffs.WithLabelValues(kind, result).Inc()
}

func (o *PushObserver) ObserveDeliveryLatency(seconds float64) { o.latency.Observe(seconds) }

// DefaultPushStatsInterval is how old the push counts /metrics reports
// may get: a scrape that finds them older starts one refresh in the
// background and reports the previous counts.
const DefaultPushStatsInterval = time.Minute

// pushStatsTimeout bounds one refresh, and how long the first scrape waits
// for the first counts.
const pushStatsTimeout = 30 * time.Second

// PushStatsCollector reports the Web Push store's counts:
//
//	herald_push_users              user agents in the store
//	herald_push_channels           registered channels (push subscriptions)
//	herald_push_stored_messages    stored messages waiting for their user agent (the backlog)
//
// Counting is a full scan of the push tables (about a second for 3 million
// channels on PostgreSQL), so a scrape never counts: it reports the counts
// of the last refresh, and one refresh runs in the background at most every
// Interval, only while something scrapes. Only the first scrape waits for
// the first counts.
type PushStatsCollector struct {
	store                    store.PushStore
	interval                 time.Duration
	now                      func() time.Time
	users, channels, backlog *prometheus.Desc

	mu         sync.Mutex
	stats      *store.PushStats // nil until the first refresh succeeded
	at         time.Time        // when the last refresh started
	refreshing chan struct{}    // closed when the refresh under way ends; nil when none runs
}

// PushStatsConfig configures a PushStatsCollector.
type PushStatsConfig struct {
	// Interval is the least time between two counts (default
	// DefaultPushStatsInterval).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// NewPushStatsCollector returns a collector reading s every
// DefaultPushStatsInterval at most.
func NewPushStatsCollector(s store.PushStore) *PushStatsCollector {
	return NewPushStatsCollectorWith(s, PushStatsConfig{})
}

// NewPushStatsCollectorWith returns a collector reading s as cfg says.
func NewPushStatsCollectorWith(s store.PushStore, cfg PushStatsConfig) *PushStatsCollector {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPushStatsInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &PushStatsCollector{
		store:    s,
		interval: cfg.Interval,
		now:      cfg.Now,
		users:    prometheus.NewDesc("herald_push_users", "Web Push user agents in the store (counted in the background, not at every scrape).", nil, nil),
		channels: prometheus.NewDesc("herald_push_channels", "Registered Web Push channels (subscriptions; counted in the background, not at every scrape).", nil, nil),
		backlog:  prometheus.NewDesc("herald_push_stored_messages", "Stored Web Push messages waiting for their user agent (counted in the background, not at every scrape).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *PushStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.users
	ch <- c.channels
	ch <- c.backlog
}

// Collect implements prometheus.Collector. Until a count succeeded it
// reports nothing (herald_store_up says whether the store is down).
func (c *PushStatsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	st := c.stats
	if c.refreshing == nil && (st == nil || c.now().Sub(c.at) >= c.interval) {
		c.refreshing = make(chan struct{})
		c.at = c.now()
		go c.refresh(c.refreshing)
	}
	wait := c.refreshing
	c.mu.Unlock()
	if st == nil && wait != nil {
		select {
		case <-wait:
		case <-time.After(pushStatsTimeout):
		}
		c.mu.Lock()
		st = c.stats
		c.mu.Unlock()
	}
	if st == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.users, prometheus.GaugeValue, float64(st.Users))
	ch <- prometheus.MustNewConstMetric(c.channels, prometheus.GaugeValue, float64(st.Channels))
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(st.Messages))
}

// refresh counts once and closes done. A failed count keeps the previous
// counts; the next is tried an Interval later.
func (c *PushStatsCollector) refresh(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), pushStatsTimeout)
	st, err := c.store.PushStats(ctx)
	cancel()
	c.mu.Lock()
	if err == nil {
		c.stats = st
	}
	c.refreshing = nil
	c.mu.Unlock()
	close(done)
}
