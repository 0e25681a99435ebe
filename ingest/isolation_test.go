package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// refusingStore wraps a store and records the size of every
// EventInsertMany. It refuses a call (non-transient, as a database refuses
// a bad row) when refuse says so for any of its events.
type refusingStore struct {
	store.Store
	refuse func(ev *herald.Event) bool

	mu    sync.Mutex
	sizes []int
}

func (r *refusingStore) EventInsertMany(ctx context.Context, p *store.EventInsertManyParams) ([]store.EventInsertResult, error) {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(p.Events))
	r.mu.Unlock()
	for _, in := range p.Events {
		if r.refuse != nil && r.refuse(in.Event) {
			return nil, errors.New("injected: the database refused a row")
		}
	}
	return r.Store.EventInsertMany(ctx, p)
}

func (r *refusingStore) callSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.sizes...)
}

// refusedByPostgres is what PostgreSQL refuses in a text or json column:
// NUL (22021) and invalid UTF-8 (22021).
func refusedByPostgres(ev *herald.Event) bool {
	return strings.Contains(ev.Key, "\x00") || !utf8.Valid(ev.Data)
}

// A group commit the store refuses because of one event fails only that
// event: every other publisher in the same commit gets its result. On
// PostgreSQL the refusal is the database's own (a NUL key, Latin-1 bytes
// in data; the API refuses both, so the test calls the Ingester directly);
// SQLite stores both, so there the store refuses them by injection.
func TestGroupCommitIsolatesRefusedEvent(t *testing.T) {
	t.Parallel()
	for _, b := range testdb.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			s := b.New(t)
			createSub(t, s, nil, nil, herald.SubscriptionEnabled)
			rs := &refusingStore{Store: s}
			if b.Name == "sqlite" {
				rs.refuse = refusedByPostgres
			}
			const n = 30
			// MaxBatch n and a long FlushInterval: the commit waits until
			// all n publishes are in it.
			ing := setup(t, rs, Config{MaxBatch: n, FlushInterval: time.Minute})

			bad := map[int]*herald.Event{
				7:  {ID: "bad-key", Type: "a.b", Key: "k\x00ey", Data: json.RawMessage(`{}`)},
				19: {ID: "bad-data", Type: "a.b", Data: json.RawMessage("{\"name\":\"caf\xe9\"}")},
			}
			evs := make([]*herald.Event, n)
			for i := range evs {
				evs[i] = bad[i]
				if evs[i] == nil {
					evs[i] = &herald.Event{ID: fmt.Sprintf("good-%d", i), Type: "a.b", Key: "k", Data: json.RawMessage(`{"i":1}`)}
				}
			}
			results := make([]store.EventInsertResult, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range evs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = ing.PublishOne(context.Background(), evs[i])
				}()
			}
			waitOrFail(t, &wg, 60*time.Second, "publishers were not answered")

			for i, ev := range evs {
				_, getErr := s.EventGet(context.Background(), &store.EventGetParams{ID: ev.ID})
				if bad[i] != nil {
					require.Error(t, errs[i], "the bad event %d fails", i)
					t.Logf("event %d refused: %v", i, errs[i])
					require.ErrorIs(t, getErr, herald.ErrNotFound, "and is not stored")
					continue
				}
				require.NoError(t, errs[i], "publisher %d shares a commit with a bad event", i)
				require.Equal(t, ev.ID, results[i].ID)
				require.Equal(t, 1, results[i].DeliveryCount)
				require.NoError(t, getErr)
			}
			sizes := rs.callSizes()
			require.Equal(t, n, sizes[0], "all publishes were in one group commit first")
			require.LessOrEqual(t, len(sizes), 1+2*2*5, "two bad events cost at most two paths of halves: %v", sizes)
		})
	}
}

// A store that is merely unavailable fails the whole group commit at once:
// committing the same events in parts would not help.
func TestGroupCommitUnavailableFailsWhole(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	createSub(t, s, nil, nil, herald.SubscriptionEnabled)
	down := &downStore{Store: s}
	const n = 8
	ing := setup(t, down, Config{MaxBatch: n, FlushInterval: time.Minute})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = ing.PublishOne(context.Background(), event("a.b", `{}`))
		}()
	}
	waitOrFail(t, &wg, 30*time.Second, "publishers were not answered")
	for _, err := range errs {
		require.ErrorIs(t, err, herald.ErrStoreUnavailable)
	}
	require.Equal(t, 1, int(down.calls.Load()), "one transaction, not split")
}

type downStore struct {
	store.Store
	calls atomic.Int64
}

func (d *downStore) EventInsertMany(context.Context, *store.EventInsertManyParams) ([]store.EventInsertResult, error) {
	d.calls.Add(1)
	return nil, fmt.Errorf("injected: %w", herald.ErrStoreUnavailable)
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, d time.Duration, msg string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal(msg)
	}
}

// Concurrent batches share a group commit, whole: a batch the store
// refuses fails alone (as a batch call always did), the others and the
// single publishes in the same commit get their results, and a batch that
// would take a commit past MaxBatch waits for the next one.
func TestGroupCommitSharedByBatches(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		groupCommitSharedByBatches(t, s)
	})
	// A batch that does not fit the current group waits for the next one.
	groupCarry(t)
}

func groupCommitSharedByBatches(t *testing.T, s store.Store) {
	createSub(t, s, nil, nil, herald.SubscriptionEnabled)
	rs := &refusingStore{Store: s, refuse: func(ev *herald.Event) bool { return ev.ID == "poison" }}
	// 3 batches of 10 and 5 single publishes fill MaxBatch 35 exactly; the
	// long FlushInterval holds the commit until they are all in it. The
	// batches do not yield to the single publishes (BatchYield; it would
	// let only one batch at a time into a group).
	ing := setup(t, rs, Config{MaxBatch: 35, FlushInterval: time.Minute, BatchYield: -1})

	batch := func(name string, n int) []*herald.Event {
		evs := make([]*herald.Event, n)
		for i := range evs {
			evs[i] = &herald.Event{ID: fmt.Sprintf("%s-%d", name, i), Type: "a.b", Data: json.RawMessage(`{}`)}
		}
		return evs
	}
	batches := [][]*herald.Event{batch("b0", 10), batch("b1", 10), batch("b2", 10)}
	batches[1][4].ID = "poison"
	var wg sync.WaitGroup
	bres := make([][]store.EventInsertResult, len(batches))
	berr := make([]error, len(batches))
	for i := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bres[i], berr[i] = ing.PublishMany(context.Background(), batches[i])
		}()
	}
	serr := make([]error, 5)
	for i := range serr {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, serr[i] = ing.PublishOne(context.Background(), &herald.Event{ID: fmt.Sprintf("one-%d", i), Type: "a.b", Data: json.RawMessage(`{}`)})
		}()
	}
	waitOrFail(t, &wg, 60*time.Second, "publishers were not answered")

	require.Error(t, berr[1], "the batch holding the refused event fails whole")
	for _, ev := range batches[1] {
		_, err := s.EventGet(context.Background(), &store.EventGetParams{ID: ev.ID})
		require.ErrorIs(t, err, herald.ErrNotFound, "nothing of the refused batch is stored")
	}
	for _, i := range []int{0, 2} {
		require.NoError(t, berr[i])
		require.Len(t, bres[i], 10)
		for n, r := range bres[i] {
			require.Equal(t, batches[i][n].ID, r.ID, "results in input order")
		}
	}
	for _, err := range serr {
		require.NoError(t, err)
	}
	sizes := rs.callSizes()
	require.Equal(t, 35, sizes[0], "every batch and single publish was in one group commit first: %v", sizes)
}

func groupCarry(t *testing.T) {
	g := &group{max: 35}
	g.add(&request{evs: make([]*herald.Event, 30)})
	g.add(&request{evs: make([]*herald.Event, 10)})
	require.Equal(t, 30, g.events)
	require.NotNil(t, g.carry)
	g.reset()
	require.Equal(t, 10, g.events, "the carried batch starts the next group")
	require.Nil(t, g.carry)
	g.reset()
	g.add(&request{evs: make([]*herald.Event, 50)})
	require.Equal(t, 50, g.events, "a batch larger than MaxBatch commits alone")
}
