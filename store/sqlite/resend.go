package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhq/herald/store"
)

// DeliveryCreateMany stores new deliveries of stored events to one
// subscription (resend, replay). The transaction holds the single writer,
// so no delete can commit between the subscription check and the insert.
func (s *Store) DeliveryCreateMany(ctx context.Context, params *store.DeliveryCreateManyParams) (int, error) {
	if params.SubscriptionID == "" {
		return 0, errors.New("sqlite: delivery create many: SubscriptionID is required")
	}
	if len(params.Deliveries) == 0 {
		return 0, nil
	}
	var n int
	err := s.writeTx(ctx, "delivery create many", func(tx queryer) error {
		live, err := subscriptionsWhere(ctx, tx, "deleted_at IS NULL", []any{params.SubscriptionID})
		if err != nil || !live[params.SubscriptionID] {
			return err
		}
		stored, err := storedEvents(ctx, tx, params.Deliveries)
		if err != nil {
			return err
		}
		dls := make([]deliveryRow, 0, len(params.Deliveries))
		counts := map[store.EventKey]int{}
		for _, d := range params.Deliveries {
			ev, ok := stored[d.Event]
			if !ok {
				continue
			}
			dls = append(dls, deliveryRow{
				d:       store.DeliveryInsert{ID: d.ID, SubscriptionID: params.SubscriptionID, NextAttemptAt: d.NextAttemptAt},
				eventID: d.Event.ID, eventTenant: d.Event.Tenant, key: ev.key, version: ev.version,
			})
			counts[d.Event]++
		}
		if len(dls) == 0 {
			return nil
		}
		// Publish positions as EventInsertMany takes them (store/ordering.go).
		var seq int64
		if err := tx.QueryRowContext(ctx, `UPDATE meta SET value = value + ? WHERE key = 'delivery_seq' RETURNING value`,
			len(dls)).Scan(&seq); err != nil {
			return fmt.Errorf("assigning publish positions: %w", err)
		}
		seq -= int64(len(dls))
		nowMS := ms(params.Now)
		for lo := 0; lo < len(dls); lo += insertChunk {
			if err := insertDeliveryRows(ctx, tx, dls[lo:min(lo+insertChunk, len(dls))], nowMS, seq+int64(lo)+1); err != nil {
				return err
			}
		}
		bump, err := tx.PrepareContext(ctx, `UPDATE events SET delivery_count = delivery_count + ? WHERE id = ? AND tenant = ?`)
		if err != nil {
			return err
		}
		defer bump.Close()
		for k, c := range counts {
			if _, err := bump.ExecContext(ctx, c, k.ID, k.Tenant); err != nil {
				return fmt.Errorf("counting deliveries: %w", err)
			}
		}
		n = len(dls)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// storedEvent is what a new delivery copies from its event.
type storedEvent struct {
	key     string
	version any
}

// storedEvents reads the key and version of the events ds name, by id,
// insertChunk ids per statement; rows of other tenants with the same id
// come along and are never used.
func storedEvents(ctx context.Context, tx queryer, ds []store.DeliveryCreate) (map[store.EventKey]storedEvent, error) {
	seen := map[string]bool{}
	var ids []any
	for _, d := range ds {
		if !seen[d.Event.ID] {
			seen[d.Event.ID] = true
			ids = append(ids, d.Event.ID)
		}
	}
	out := make(map[store.EventKey]storedEvent, len(ids))
	for lo := 0; lo < len(ids); lo += insertChunk {
		in, args := inList(ids[lo:min(lo+insertChunk, len(ids))])
		rows, err := tx.QueryContext(ctx, `SELECT id, tenant, key, version FROM events WHERE id IN (`+in+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				k       store.EventKey
				key     string
				version sql.NullInt64
			)
			if err := rows.Scan(&k.ID, &k.Tenant, &key, &version); err != nil {
				rows.Close()
				return nil, err
			}
			ev := storedEvent{key: key}
			if version.Valid {
				ev.version = version.Int64
			}
			out[k] = ev
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
