package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGWatch observes the PostgreSQL a node runs on while the bench loads
// it: what its backends wait on (sampled every 250 ms from
// pg_stat_activity), checkpoints (pg_stat_bgwriter) and autovacuum runs of
// herald's tables (pg_stat_user_tables). It is how the after-load check
// tells a slow phase's cause (issue 28) without a second tool.
type PGWatch struct {
	// connMu serialises the sampler's and Mark's queries: a pgx
	// connection is not safe for concurrent use.
	connMu sync.Mutex
	conn   *pgx.Conn
	schema string

	mu      sync.Mutex
	waits   map[string]int64 // "Lock:transactionid" → samples, "CPU" when none
	samples int64
	avBusy  int64 // samples with an autovacuum worker on the database

	stop chan struct{}
	done chan struct{}
}

// PGMark is a position of a PGWatch, for Since.
type PGMark struct {
	waits       map[string]int64
	samples     int64
	avBusy      int64
	checkpoints int64
	ckptBuffers int64
	tables      map[string]pgTableStats
}

type pgTableStats struct {
	vacuums, analyzes int64
	dead              int64
}

// DBObservation is what the database did between a mark and Since.
type DBObservation struct {
	// Checkpoints started (timed or requested) and the buffers they wrote.
	Checkpoints       int64 `json:"checkpoints"`
	CheckpointBuffers int64 `json:"checkpoint_buffers"`
	// Autovacuum and autoanalyze runs per table of herald's schema.
	Autovacuum  map[string]int64 `json:"autovacuum,omitempty"`
	Autoanalyze map[string]int64 `json:"autoanalyze,omitempty"`
	// DeadTuples of the queue's tables at the end.
	DeadTuples map[string]int64 `json:"dead_tuples,omitempty"`
	// Waits counts samples of herald's active backends by wait event
	// ("CPU" for a backend running); Samples is the samples taken and
	// AutovacuumBusyPct the share of them with an autovacuum worker on the
	// database.
	Waits             map[string]int64 `json:"waits,omitempty"`
	Samples           int64            `json:"samples"`
	AutovacuumBusyPct float64          `json:"autovacuum_busy_pct"`
}

// AutovacuumRuns is the autovacuum runs of every table together.
func (o *DBObservation) AutovacuumRuns() int64 {
	var n int64
	for _, v := range o.Autovacuum {
		n += v
	}
	return n
}

// TopWait names the most sampled wait that is not CPU or client reads
// ("-" when none), with its share of the samples.
func (o *DBObservation) TopWait() string {
	best, bestN := "", int64(0)
	for _, k := range slices.Sorted(maps.Keys(o.Waits)) {
		if k == "CPU" || strings.HasPrefix(k, "Client:") {
			continue
		}
		if n := o.Waits[k]; n > bestN {
			best, bestN = k, n
		}
	}
	if best == "" || o.Samples == 0 {
		return "-"
	}
	return fmt.Sprintf("%s %.0f%%", best, 100*float64(bestN)/float64(o.Samples))
}

// queueStatTables are the tables whose dead tuples the observation reports.
var queueStatTables = []string{"deliveries_active", "deliveries_done", "events", "attempts", "delivered_counter"}

// WatchPostgres connects to dbURL and samples until Close. schema is
// herald's schema ("" for the search path's first, usually public).
func WatchPostgres(ctx context.Context, dbURL, schema string) (*PGWatch, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("observing the database: %w", err)
	}
	if schema == "" {
		if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			_ = conn.Close(ctx)
			return nil, fmt.Errorf("observing the database: %w", err)
		}
	}
	w := &PGWatch{conn: conn, schema: schema, waits: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w, nil
}

// Close stops sampling.
func (w *PGWatch) Close() {
	close(w.stop)
	<-w.done
	_ = w.conn.Close(context.Background())
}

func (w *PGWatch) loop() {
	defer close(w.done)
	tk := time.NewTicker(250 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tk.C:
			w.sample()
		}
	}
}

func (w *PGWatch) sample() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w.connMu.Lock()
	defer w.connMu.Unlock()
	rows, err := w.conn.Query(ctx, `
		SELECT backend_type, coalesce(wait_event_type || ':' || wait_event, 'CPU')
		FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
			AND (state = 'active' OR backend_type = 'autovacuum worker')`)
	if err != nil {
		return
	}
	defer rows.Close()
	waits := map[string]int64{}
	av := false
	for rows.Next() {
		var typ, wait string
		if rows.Scan(&typ, &wait) != nil {
			return
		}
		if typ == "autovacuum worker" {
			av = true
			continue
		}
		waits[wait]++
	}
	if rows.Err() != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	if av {
		w.avBusy++
	}
	for k, v := range waits {
		w.waits[k] += v
	}
}

// Mark reads the counters now.
func (w *PGWatch) Mark() PGMark {
	w.mu.Lock()
	m := PGMark{waits: maps.Clone(w.waits), samples: w.samples, avBusy: w.avBusy}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.connMu.Lock()
	defer w.connMu.Unlock()
	_ = w.conn.QueryRow(ctx, `SELECT checkpoints_timed + checkpoints_req, buffers_checkpoint FROM pg_stat_bgwriter`).
		Scan(&m.checkpoints, &m.ckptBuffers)
	m.tables = map[string]pgTableStats{}
	rows, err := w.conn.Query(ctx, `SELECT relname, autovacuum_count, autoanalyze_count, n_dead_tup
		FROM pg_stat_user_tables WHERE schemaname = $1`, w.schema)
	if err != nil {
		return m
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var st pgTableStats
		if rows.Scan(&name, &st.vacuums, &st.analyzes, &st.dead) == nil {
			m.tables[name] = st
		}
	}
	return m
}

// Since is what happened from mark to now.
func (w *PGWatch) Since(mark PGMark) DBObservation {
	// One sample at the end, so a span shorter than the sampling interval
	// has one too. (The statistics collector publishes table counters
	// with a delay of up to PGSTAT_MIN_INTERVAL, 1 s: a shorter span may
	// miss an autovacuum run that ended in it.)
	w.sample()
	now := w.Mark()
	o := DBObservation{
		Checkpoints: now.checkpoints - mark.checkpoints, CheckpointBuffers: now.ckptBuffers - mark.ckptBuffers,
		Samples: now.samples - mark.samples, Waits: map[string]int64{},
		Autovacuum: map[string]int64{}, Autoanalyze: map[string]int64{}, DeadTuples: map[string]int64{},
	}
	for k, v := range now.waits {
		if d := v - mark.waits[k]; d > 0 {
			o.Waits[k] = d
		}
	}
	if o.Samples > 0 {
		o.AutovacuumBusyPct = 100 * float64(now.avBusy-mark.avBusy) / float64(o.Samples)
	}
	for name, st := range now.tables {
		before := mark.tables[name]
		if d := st.vacuums - before.vacuums; d > 0 {
			o.Autovacuum[name] = d
		}
		if d := st.analyzes - before.analyzes; d > 0 {
			o.Autoanalyze[name] = d
		}
		if slices.Contains(queueStatTables, name) {
			o.DeadTuples[name] = st.dead
		}
	}
	return o
}
