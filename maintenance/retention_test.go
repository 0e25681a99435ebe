package maintenance_test

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/internal/testlog"
	"github.com/heraldhq/herald/maintenance"
	"github.com/heraldhq/herald/store"
)

// retentionObserver records the sweeps it is shown.
type retentionObserver struct {
	staleObserver
	mu     sync.Mutex
	sweeps []store.RetentionSweepResult
}

func (o *retentionObserver) ObserveRetention(r *store.RetentionSweepResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sweeps = append(o.sweeps, *r)
}

// TestSweepReportsEveryKind: a sweep that deleted only rows of the newer
// kinds (here a rotated-out secret) is logged and observed like any other.
func TestSweepReportsEveryKind(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		ctx := t.Context()
		sub := createSub(t, s)
		require.NoError(t, s.SubscriptionSecretRotate(ctx, &store.SubscriptionSecretRotateParams{
			ID: sub.ID, NewSecret: "whsec_new", GraceUntil: t0, Now: t0,
		}))
		clk := &clock{now: t0.Add(2 * time.Hour)}
		logs := &testlog.Buffer{}
		obs := &retentionObserver{}
		m := maintenance.New(maintenance.Config{
			Store: s, Retention: maintenance.Retention{Delivered: time.Hour}, Now: clk.Now,
			Logger: slog.New(slog.NewTextHandler(logs, nil)), Observer: obs,
		})
		res, err := m.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, &store.RetentionSweepResult{Secrets: 1}, res)
		require.Contains(t, logs.String(), "retention sweep")
		require.Contains(t, logs.String(), "secrets=1")
		require.Equal(t, []store.RetentionSweepResult{{Secrets: 1}}, obs.sweeps)
	})
}
