package maintenance

import (
	"context"
	"time"

	"github.com/heraldhq/herald/store"
)

// Vacuum runs one QueueVacuum of v (the maintainer's store) on the queue
// tables. Run by the leader; Start calls it every VacuumInterval.
func (m *Maintainer) Vacuum(ctx context.Context, v store.Vacuumer) error {
	return m.vacuum(ctx, v, false)
}

// vacuumArchive cleans the tables retention deletes from; Start calls it
// after a sweep that deleted rows.
func (m *Maintainer) vacuumArchive(ctx context.Context) {
	v, ok := m.cfg.Store.(store.Vacuumer)
	if !ok || m.cfg.VacuumInterval <= 0 {
		return
	}
	if err := m.vacuum(ctx, v, true); err != nil && ctx.Err() == nil {
		m.cfg.Logger.Warn("archive vacuum failed", "err", err)
	}
}

func (m *Maintainer) vacuum(ctx context.Context, v store.Vacuumer, archive bool) error {
	start := time.Now()
	res, err := v.QueueVacuum(ctx, &store.QueueVacuumParams{Archive: archive})
	if m.cfg.Observer != nil {
		m.cfg.Observer.ObserveVacuum(time.Since(start), err)
	}
	if err != nil {
		return err
	}
	m.cfg.Logger.Debug("vacuum", "archive", archive, "tables", res.Tables, "took", time.Since(start))
	return nil
}
