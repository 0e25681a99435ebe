package eventtype

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// countingReader counts the catalog's store reads.
type countingReader struct {
	Reader
	versions, lists atomic.Int32
}

func (c *countingReader) EventTypesVersion(ctx context.Context) (int64, error) {
	c.versions.Add(1)
	return c.Reader.EventTypesVersion(ctx)
}

func (c *countingReader) EventTypeList(ctx context.Context, p *store.EventTypeListParams) (*store.EventTypeListResult, error) {
	c.lists.Add(1)
	return c.Reader.EventTypeList(ctx, p)
}

// TestEventTypeCatalogRefresh: publishes read the schemas from the cache
// (one version read per poll interval, however many events), a change
// made elsewhere shows within one poll interval, and Invalidate (a write
// through this node) shows at once.
func TestEventTypeCatalogRefresh(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

		et := &herald.EventType{Name: "order.placed", Schema: json.RawMessage(orderSchema), Validate: true,
			CreatedAt: now, UpdatedAt: now}
		_, err := s.EventTypeCreate(ctx, &store.EventTypeCreateParams{EventType: et})
		require.NoError(t, err)
		// Deprecated types still validate; types without validate do not.
		for _, other := range []*herald.EventType{
			{Name: "old.type", Schema: json.RawMessage(`{"type":"string"}`), Validate: true, Deprecated: true},
			{Name: "doc.only", Schema: json.RawMessage(`{"type":"string"}`)},
		} {
			other.CreatedAt, other.UpdatedAt = now, now
			_, err := s.EventTypeCreate(ctx, &store.EventTypeCreateParams{EventType: other})
			require.NoError(t, err)
		}

		r := &countingReader{Reader: s}
		c := NewCatalog(r, 5*time.Second, nil)
		c.now = clock
		bad := &herald.Event{Type: "order.placed", Data: json.RawMessage(`{"amount":"1"}`)}
		good := &herald.Event{Type: "order.placed", Data: json.RawMessage(`{"amount":1}`)}
		var wg sync.WaitGroup
		badErrs, goodErrs := make([]error, 50), make([]error, 50)
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				badErrs[i], goodErrs[i] = c.Validate(ctx, bad, "data"), c.Validate(ctx, good, "data")
			}()
		}
		wg.Wait()
		for i := range 50 {
			e := requireHeraldError(t, badErrs[i], herald.CodeSchemaMismatch, "data.amount")
			require.Contains(t, e, "order.placed")
			require.NoError(t, goodErrs[i])
		}
		requireHeraldError(t, c.Validate(ctx, &herald.Event{Type: "old.type", Data: json.RawMessage(`1`)}, "data"),
			herald.CodeSchemaMismatch, "data")
		require.NoError(t, c.Validate(ctx, &herald.Event{Type: "doc.only", Data: json.RawMessage(`1`)}, "data"))
		require.NoError(t, c.Validate(ctx, &herald.Event{Type: "not.in.catalog", Data: json.RawMessage(`1`)}, "data"))
		require.Equal(t, int32(1), r.versions.Load(), "one version read for 100 publishes")
		require.Equal(t, int32(1), r.lists.Load())

		// Another node turns validation off: seen after the poll interval.
		et.Validate, et.UpdatedAt = false, now
		_, err = s.EventTypeUpdate(ctx, &store.EventTypeUpdateParams{EventType: et})
		require.NoError(t, err)
		require.Error(t, c.Validate(ctx, bad, "data"), "within the poll interval the cache stands")
		advance(5 * time.Second)
		require.NoError(t, c.Validate(ctx, bad, "data"))
		require.Equal(t, int32(2), r.versions.Load())
		require.Equal(t, int32(2), r.lists.Load())

		// Unchanged version: one version read, no list.
		advance(5 * time.Second)
		require.NoError(t, c.Validate(ctx, bad, "data"))
		require.Equal(t, int32(3), r.versions.Load())
		require.Equal(t, int32(2), r.lists.Load())

		// This node's write: Invalidate shows it at once.
		et.Validate = true
		_, err = s.EventTypeUpdate(ctx, &store.EventTypeUpdateParams{EventType: et})
		require.NoError(t, err)
		c.Invalidate()
		// ValidateWithin (the sources' call) reads the store as Validate
		// does when the cache is stale, and only then.
		requireHeraldError(t, c.ValidateWithin(time.Second, bad, "data"), herald.CodeSchemaMismatch, "data.amount")
		versions := r.versions.Load()
		require.NoError(t, c.ValidateWithin(time.Second, good, "data"))
		require.Equal(t, versions, r.versions.Load(), "a fresh cache: no read")

		// Deleted: no longer validated.
		require.NoError(t, s.EventTypeDelete(ctx, "order.placed"))
		c.Invalidate()
		require.NoError(t, c.Validate(ctx, bad, "data"))
	})
}

// failingReader fails every read.
type failingReader struct{ Reader }

func (failingReader) EventTypesVersion(context.Context) (int64, error) {
	return 0, herald.ErrStoreUnavailable
}

// TestEventTypeCatalogStoreDown: with nothing loaded a store failure is
// the publish's error; once loaded, the last schemas keep serving.
func TestEventTypeCatalogStoreDown(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	ctx := t.Context()
	down := NewCatalog(failingReader{s}, time.Second, nil)
	require.ErrorIs(t, down.Validate(ctx, &herald.Event{Type: "a", Data: json.RawMessage(`1`)}, "data"), herald.ErrStoreUnavailable)

	_, err := s.EventTypeCreate(ctx, &store.EventTypeCreateParams{EventType: &herald.EventType{Name: "a",
		Schema: json.RawMessage(`{"type":"string"}`), Validate: true}})
	require.NoError(t, err)
	reader := &switchReader{Reader: s}
	c := NewCatalog(reader, time.Second, nil)
	requireHeraldError(t, c.Validate(ctx, &herald.Event{Type: "a", Data: json.RawMessage(`1`)}, "data"), herald.CodeSchemaMismatch, "data")
	reader.down.Store(true)
	c.Invalidate()
	requireHeraldError(t, c.Validate(ctx, &herald.Event{Type: "a", Data: json.RawMessage(`1`)}, "data"), herald.CodeSchemaMismatch, "data")
}

type switchReader struct {
	Reader
	down atomic.Bool
}

func (r *switchReader) EventTypesVersion(ctx context.Context) (int64, error) {
	if r.down.Load() {
		return 0, herald.ErrStoreUnavailable
	}
	return r.Reader.EventTypesVersion(ctx)
}
