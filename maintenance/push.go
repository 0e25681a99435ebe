package maintenance

import (
	"context"
	"time"

	"github.com/heraldhq/herald/store"
)

// DefaultPushIdleExpiry drops Web Push user agents that have not connected
// for 60 days (autopush's router record lifetime; Firefox offers a profile
// reset after as long idle). Their endpoints then answer 410.
const DefaultPushIdleExpiry = 60 * 24 * time.Hour

// maxPushSweepRounds bounds one run of SweepPush: each round deletes at
// most store.RetentionScanRows of each kind, so one run deletes at most
// 100 × 10,000 rows and the rest waits for the next interval.
const maxPushSweepRounds = 100

// PushRetentionObserver is told what a push sweep deleted; metrics.Observer
// implements it.
type PushRetentionObserver interface {
	ObservePushRetention(r *store.PushRetentionSweepResult)
}

// SweepPush deletes expired Web Push messages and user agents idle for
// longer than PushIdleExpiry (0: kept for ever), in bounded rounds, while
// a round's count reaches the limit. Run by the leader.
func (m *Maintainer) SweepPush(ctx context.Context, ps store.PushStore) (*store.PushRetentionSweepResult, error) {
	total := &store.PushRetentionSweepResult{}
	now := m.cfg.Now().UTC()
	params := &store.PushRetentionSweepParams{Now: now, Limit: store.RetentionScanRows}
	if m.cfg.PushIdleExpiry > 0 {
		params.IdleBefore = now.Add(-m.cfg.PushIdleExpiry)
	}
	for range maxPushSweepRounds {
		res, err := ps.PushRetentionSweep(ctx, params)
		if err != nil {
			m.observePush(total)
			return total, err
		}
		total.Messages += res.Messages
		total.Users += res.Users
		if res.Messages < params.Limit && res.Users < params.Limit {
			break
		}
	}
	m.observePush(total)
	if total.Messages+total.Users > 0 {
		m.cfg.Logger.Info("push retention sweep", "messages", total.Messages, "user_agents", total.Users)
	}
	return total, nil
}

func (m *Maintainer) observePush(r *store.PushRetentionSweepResult) {
	if o, ok := m.cfg.Observer.(PushRetentionObserver); ok && r.Messages+r.Users > 0 {
		o.ObservePushRetention(r)
	}
}
