package maintenance

import (
	"context"

	"github.com/heraldhq/herald/store"
)

// Sweep runs one retention sweep (the store deletes in transactions of at
// most SweepBatch rows). Run by the leader; Start calls it on a ticker.
func (m *Maintainer) Sweep(ctx context.Context) (*store.RetentionSweepResult, error) {
	r := m.cfg.Retention
	res, err := m.cfg.Store.RetentionSweep(ctx, &store.RetentionSweepParams{
		Delivered: r.Delivered,
		Dead:      r.Dead,
		Events:    r.Events,
		BatchSize: m.cfg.SweepBatch,
		Now:       m.cfg.Now().UTC(),
	})
	if res != nil && m.cfg.Observer != nil {
		m.cfg.Observer.ObserveRetention(res)
	}
	if err != nil {
		return res, err
	}
	if res.Total() > 0 {
		m.cfg.Logger.Info("retention sweep", "deliveries", res.Deliveries, "dead", res.Dead, "events", res.Events,
			"keys", res.Keys, "subscriptions", res.Subscriptions, "secrets", res.Secrets, "attempts", res.Attempts)
	}
	return res, nil
}
