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

// count returns how many calls vacuumed the archive and how many the queue.
func (v *vacuumStore) count() (archive, queue int) {
	for _, c := range v.Calls() {
		if c.Archive {
			archive++
		} else {
			queue++
		}
	}
	return archive, queue
}

// TestVacuum: the leader vacuums the queue every VacuumInterval, and the
// archive once after each sweep that deleted rows.
func TestVacuum(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		v := &vacuumStore{Store: s}
		clk := &clock{now: t0}
		m := maintenance.New(maintenance.Config{
			Store: v, Retention: maintenance.Retention{Events: time.Hour}, Now: clk.Now,
			VacuumInterval: 5 * time.Millisecond, SweepInterval: 5 * time.Millisecond,
		})
		m.Start()
		t.Cleanup(m.Stop)
		require.Eventually(t, func() bool { _, q := v.count(); return q >= 2 }, 10*time.Second, 5*time.Millisecond)
		archive, _ := v.count()
		require.Zero(t, archive, "the sweeps deleted nothing yet")

		ing := ingest.New(ingest.Config{Store: s, Now: clk.Now})
		_, err := ing.PublishMany(ctx, []*herald.Event{{Type: "app.created", Data: json.RawMessage(`{}`)}})
		require.NoError(t, err)
		clk.Set(t0.Add(2 * time.Hour)) // the event is past its retention
		require.Eventually(t, func() bool { a, _ := v.count(); return a == 1 }, 10*time.Second, 5*time.Millisecond)

		// Later sweeps delete nothing: no further archive vacuum, while the
		// queue vacuums go on.
		_, q := v.count()
		require.Eventually(t, func() bool { _, q2 := v.count(); return q2 >= q+3 }, 10*time.Second, 5*time.Millisecond)
		archive, _ = v.count()
		require.Equal(t, 1, archive)
	})
}
