package maintenance

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// CheckStale reads the queue once and raises herald.queue.stale for every
// tier whose oldest due pending delivery has waited at least StaleAfter —
// at most once per tier per StaleAfter while the tier stays stale. A tier
// that recovers is forgotten, so its next stale spell alarms at once. The
// event's data: tier, oldest_pending_age_s, pending, due, threshold_s.
// Run by the leader; Start calls it on a ticker.
func (m *Maintainer) CheckStale(ctx context.Context) error {
	if m.cfg.StaleAfter <= 0 || m.cfg.Publisher == nil {
		return nil
	}
	now := m.cfg.Now().UTC()
	st, err := m.cfg.Store.StatsGet(ctx, &store.StatsGetParams{Tiers: m.cfg.Tiers, Now: now})
	if err != nil {
		return fmt.Errorf("error reading queue stats: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var alarms []*herald.Event
	var tiers []int
	for _, ts := range st.Tiers {
		if ts.Due == 0 || ts.OldestPendingAge < m.cfg.StaleAfter {
			delete(m.lastAlarm, ts.Tier)
			continue
		}
		if last, ok := m.lastAlarm[ts.Tier]; ok && now.Sub(last) < m.cfg.StaleAfter {
			continue
		}
		data, err := json.Marshal(map[string]any{
			"tier":                 ts.Tier,
			"oldest_pending_age_s": math.Round(ts.OldestPendingAge.Seconds()*1000) / 1000,
			"pending":              ts.Pending,
			"due":                  ts.Due,
			"threshold_s":          m.cfg.StaleAfter.Seconds(),
		})
		if err != nil {
			return err
		}
		alarms = append(alarms, &herald.Event{Type: herald.EventTypeQueueStale, Data: data})
		tiers = append(tiers, ts.Tier)
	}
	if len(alarms) == 0 {
		return nil
	}
	if _, err := m.cfg.Publisher.PublishMany(ctx, alarms); err != nil {
		return fmt.Errorf("error publishing %s: %w", herald.EventTypeQueueStale, err)
	}
	for _, tier := range tiers {
		m.lastAlarm[tier] = now
		m.cfg.Logger.Warn("queue is stale", "tier", tier, "threshold", m.cfg.StaleAfter)
		if m.cfg.Observer != nil {
			m.cfg.Observer.ObserveStaleAlarm(tier)
		}
	}
	return nil
}
