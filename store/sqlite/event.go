package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// EventInsertMany stores events and their deliveries in one transaction.
func (s *Store) EventInsertMany(ctx context.Context, params *store.EventInsertManyParams) ([]store.EventInsertResult, error) {
	var out []store.EventInsertResult
	err := s.writeTx(ctx, "event insert many", func(tx *sql.Tx) error {
		var err error
		out, err = insertEvents(ctx, tx, params.Events, params.Now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertEvents is EventInsertMany inside an open transaction (also used by
// DeliveryCompleteMany for system events). Statements are prepared once per
// call: a batch of 1000 events runs the same two inserts thousands of times.
func insertEvents(ctx context.Context, tx *sql.Tx, events []store.EventInsert, now time.Time) ([]store.EventInsertResult, error) {
	if len(events) == 0 {
		return []store.EventInsertResult{}, nil
	}
	insEvent, err := tx.PrepareContext(ctx, `INSERT INTO events (id, type, key, version, data, delivery_count, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`)
	if err != nil {
		return nil, err
	}
	defer insEvent.Close()
	insDelivery, err := tx.PrepareContext(ctx, `INSERT INTO deliveries (id, event_id, subscription_id, state, tier,
		next_attempt_at, event_key, event_version, created_at, updated_at)
		VALUES (?, ?, ?, 'pending', 0, ?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, err
	}
	defer insDelivery.Close()

	nowMS := ms(now)
	out := make([]store.EventInsertResult, len(events))
	seen := make(map[string]int, len(events)) // event id -> delivery count of its first occurrence
	for i, in := range events {
		ev := in.Event
		if n, ok := seen[ev.ID]; ok {
			out[i] = store.EventInsertResult{ID: ev.ID, Duplicate: true, DeliveryCount: n}
			continue
		}
		var version any
		if ev.Version != nil {
			version = *ev.Version
		}
		res, err := insEvent.ExecContext(ctx, ev.ID, ev.Type, ev.Key, version, []byte(store.RawJSON(ev.Data)),
			len(in.Deliveries), ms(ev.CreatedAt))
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", ev.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var count int
			if err := tx.QueryRowContext(ctx, `SELECT delivery_count FROM events WHERE id = ?`, ev.ID).Scan(&count); err != nil {
				return nil, err
			}
			seen[ev.ID] = count
			out[i] = store.EventInsertResult{ID: ev.ID, Duplicate: true, DeliveryCount: count}
			continue
		}
		for _, d := range in.Deliveries {
			if _, err := insDelivery.ExecContext(ctx, d.ID, ev.ID, d.SubscriptionID, ms(d.NextAttemptAt),
				ev.Key, version, nowMS, nowMS); err != nil {
				return nil, fmt.Errorf("event %s delivery %s: %w", ev.ID, d.ID, err)
			}
		}
		seen[ev.ID] = len(in.Deliveries)
		out[i] = store.EventInsertResult{ID: ev.ID, DeliveryCount: len(in.Deliveries)}
	}
	return out, nil
}

// EventGet returns an event and its deliveries.
func (s *Store) EventGet(ctx context.Context, id string) (*store.EventGetResult, error) {
	res := &store.EventGetResult{}
	err := s.readTx(ctx, "event get", func(tx *sql.Tx) error {
		ev, err := getEvent(ctx, tx, id)
		if err != nil {
			return err
		}
		res.Event = ev
		rows, err := tx.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE event_id = ? ORDER BY id`, id)
		if err != nil {
			return err
		}
		res.Deliveries, err = scanDeliveries(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

const eventColumns = `id, type, key, version, data, created_at`

func scanEvent(row scanner) (*herald.Event, error) {
	var (
		ev        herald.Event
		version   sql.NullInt64
		data      []byte
		createdAt int64
	)
	if err := row.Scan(&ev.ID, &ev.Type, &ev.Key, &version, &data, &createdAt); err != nil {
		return nil, err
	}
	if version.Valid {
		v := version.Int64
		ev.Version = &v
	}
	ev.Data = data
	ev.CreatedAt = fromMS(createdAt)
	return &ev, nil
}

func getEvent(ctx context.Context, q queryer, id string) (*herald.Event, error) {
	ev, err := scanEvent(q.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.NotFoundf("event %s not found", id)
	}
	return ev, err
}
