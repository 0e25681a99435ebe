package sourcetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/source"
	"github.com/heraldhq/herald/store"
)

// MaxBody is the rig's body cap: small, so the too-large case is cheap.
const MaxBody = 4096

// Rig is a real store (SQLite), ingester and connection set, on which
// the suite starts source managers (nodes).
type Rig struct {
	Store     store.Store
	Ingester  *ingest.Ingester
	Conns     *destination.Static
	Conn      *herald.Connection
	dial      source.Dialer
	decode    source.DecodeFunc
	Publisher *FlakyPublisher
}

// NewRig opens a SQLite store with a connection named "broker" of h's
// type and URL.
func NewRig(t *testing.T, h Harness, dial source.Dialer, decode source.DecodeFunc) *Rig {
	t.Helper()
	st := testdb.SQLite(t)
	ing := ingest.New(ingest.Config{Store: st})
	ing.Start()
	t.Cleanup(ing.Close)
	now := time.Now().UTC().Truncate(time.Millisecond)
	conn := &herald.Connection{Name: "broker", Type: h.Type(), URL: h.URL(), Tenants: []string{},
		AllTenants: true, CreatedAt: now, UpdatedAt: now}
	created, err := st.ConnectionCreate(context.Background(), &store.ConnectionCreateParams{Connection: conn})
	require.NoError(t, err)
	return &Rig{Store: st, Ingester: ing, Conns: destination.NewStatic(created), Conn: created,
		dial: dial, decode: decode, Publisher: &FlakyPublisher{Publisher: ing}}
}

// CreateSource stores src (Name and Connection filled in when empty).
func (r *Rig) CreateSource(t *testing.T, src *herald.Source) *herald.Source {
	t.Helper()
	if src.Name == "" {
		src.Name = fmt.Sprintf("src-%d", rand.Int64())
	}
	if src.Connection == "" {
		src.Connection = r.Conn.Name
	}
	src.Enabled = true
	now := time.Now().UTC().Truncate(time.Millisecond)
	src.CreatedAt, src.UpdatedAt = now, now
	require.NoError(t, herald.CheckSource(src))
	created, err := r.Store.SourceCreate(context.Background(), &store.SourceCreateParams{Source: src})
	require.NoError(t, err)
	return created
}

// Node starts a source manager as node name; it stops on cleanup (or
// when the returned stop is called).
func (r *Rig) Node(t *testing.T, name string) (stop func()) {
	t.Helper()
	dialers := &source.Dialers{}
	dialers.Register(r.Conn.Type, r.dial)
	m := source.New(source.Config{
		Store: r.Store, Connections: r.Conns, Dialers: dialers, Publisher: r.Publisher,
		Decode: r.decode, Node: name, MaxBody: MaxBody,
		Poll: 100 * time.Millisecond, ReportInterval: 100 * time.Millisecond, LeaseTTL: 2 * time.Second,
		BackoffMin: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	var stopped atomic.Bool
	stop = func() {
		if stopped.CompareAndSwap(false, true) {
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// WaitEvents waits until every id is a stored event (tenant: their
// tenant) and returns them by id.
func (r *Rig) WaitEvents(t *testing.T, tenant string, ids []string, within time.Duration) map[string]*herald.Event {
	t.Helper()
	got := map[string]*herald.Event{}
	deadline := time.Now().Add(within)
	for {
		for _, id := range ids {
			if got[id] != nil {
				continue
			}
			res, err := r.Store.EventGet(context.Background(), &store.EventGetParams{ID: id, Tenant: tenant})
			if err == nil {
				got[id] = res.Event
			}
		}
		if len(got) == len(ids) {
			return got
		}
		if time.Now().After(deadline) {
			missing := []string{}
			for _, id := range ids {
				if got[id] == nil && len(missing) < 5 {
					missing = append(missing, id)
				}
			}
			t.Fatalf("%d of %d events stored after %s; missing e.g. %v", len(got), len(ids), within, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CountEvents counts every stored event (up to 100,000).
func (r *Rig) CountEvents(t *testing.T) int {
	t.Helper()
	n := 0
	var after *store.EventCursor
	for {
		res, err := r.Store.EventList(context.Background(), &store.EventListParams{Limit: 1000, After: after})
		require.NoError(t, err)
		n += len(res.Events)
		if len(res.Events) < 1000 || n >= 100_000 {
			return n
		}
		last := res.Events[len(res.Events)-1]
		after = &store.EventCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// WaitStatus waits until the source's status satisfies ok.
func (r *Rig) WaitStatus(t *testing.T, name string, within time.Duration, ok func(*herald.SourceStatus) bool) *herald.SourceStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	var last *herald.SourceStatus
	for {
		st, err := r.Store.SourceStatusGet(context.Background(), &store.SourceStatusGetParams{Name: name, Now: time.Now()})
		if err == nil {
			last = st
			if ok(st) {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("source %s status not as expected after %s; last %+v (err %v)", name, within, last, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FlakyPublisher passes PublishMany to the ingester, or fails it as a
// store outage would while Down is set.
type FlakyPublisher struct {
	source.Publisher
	Down  atomic.Bool
	Calls atomic.Int64
}

// PublishMany implements source.Publisher.
func (p *FlakyPublisher) PublishMany(ctx context.Context, events []*herald.Event) ([]store.EventInsertResult, error) {
	p.Calls.Add(1)
	if p.Down.Load() {
		return nil, fmt.Errorf("sourcetest outage: %w", herald.ErrStoreUnavailable)
	}
	return p.Publisher.PublishMany(ctx, events)
}
