package maintenance_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/maintenance"
	"github.com/heraldhq/herald/store"
)

// vacuumStore records the QueueVacuum calls made on a real store.
type vacuumStore struct {
	store.Store
	mu    sync.Mutex
	calls []store.QueueVacuumParams
}

func (v *vacuumStore) QueueVacuum(_ context.Context, p *store.QueueVacuumParams) (*store.QueueVacuumResult, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = append(v.calls, *p)
	return &store.QueueVacuumResult{}, nil
}

func (v *vacuumStore) Calls() []store.QueueVacuumParams {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]store.QueueVacuumParams(nil), v.calls...)
}

// TestVacuum: the leader vacuums the queue every VacuumInterval, and the
// archive too after a sweep that deleted rows (once).
func TestVacuum(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		v := &vacuumStore{Store: s}
		clk := &clock{now: t0}
		m := maintenance.New(maintenance.Config{
			Store: v, Retention: maintenance.Retention{Events: time.Hour}, Now: clk.Now,
			VacuumInterval: 5 * time.Millisecond,
		})
		m.Start()
		t.Cleanup(m.Stop)
		require.Eventually(t, func() bool { return len(v.Calls()) > 0 }, 10*time.Second, 5*time.Millisecond)
		require.False(t, v.Calls()[0].Archive, "nothing swept yet")

		ing := ingest.New(ingest.Config{Store: s, Now: clk.Now})
		_, err := ing.PublishMany(ctx, []*herald.Event{{Type: "app.created", Data: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		clk.Set(t0.Add(2 * time.Hour))
		res, err := m.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, res.Events)

		n := len(v.Calls())
		require.Eventually(t, func() bool { return len(v.Calls()) >= n+2 }, 10*time.Second, 5*time.Millisecond)
		archives := 0
		for _, c := range v.Calls()[n-1:] { // a call may have been under way during the sweep
			if c.Archive {
				archives++
			}
		}
		require.Equal(t, 1, archives, "the archive is vacuumed once after the sweep")
	})
}
