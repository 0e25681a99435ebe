package maintenance

import (
	"context"
	"time"

	"github.com/heraldhq/herald/store"
)

// Vacuum runs one QueueVacuum of v (the maintainer's store), including the
// archive tables when a retention sweep deleted rows since the last one.
// Run by the leader; Start calls it every VacuumInterval.
func (m *Maintainer) Vacuum(ctx context.Context, v store.Vacuumer) error {
	archive := m.swept.Swap(false)
	start := time.Now()
	res, err := v.QueueVacuum(ctx, &store.QueueVacuumParams{Archive: archive})
	if m.cfg.Observer != nil {
		m.cfg.Observer.ObserveVacuum(time.Since(start), err)
	}
	if err != nil {
		if archive {
			m.swept.Store(true) // try the archive again next time
		}
		return err
	}
	m.cfg.Logger.Debug("queue vacuum", "tables", res.Tables, "took", time.Since(start))
	return nil
}
