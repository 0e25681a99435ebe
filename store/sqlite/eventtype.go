package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Event types (store/eventtype.go, migration 020).

const eventTypeColumns = `name, description, schema, example, deprecated, validate, created_at, updated_at`

func scanEventType(row scanner) (*herald.EventType, error) {
	var (
		et                   herald.EventType
		schema, example      sql.NullString
		createdAt, updatedAt int64
	)
	if err := row.Scan(&et.Name, &et.Description, &schema, &example, &et.Deprecated, &et.Validate,
		&createdAt, &updatedAt); err != nil {
		return nil, err
	}
	store.EventTypeJSONFill(&et, nullString(schema), nullString(example))
	et.CreatedAt, et.UpdatedAt = fromMS(createdAt), fromMS(updatedAt)
	return &et, nil
}

func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

func getEventType(ctx context.Context, q queryer, name string) (*herald.EventType, error) {
	et, err := scanEventType(q.QueryRowContext(ctx, `SELECT `+eventTypeColumns+` FROM event_types WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.NotFoundf("event type %q not found", name)
	}
	return et, err
}

func bumpEventTypesVersion(ctx context.Context, tx queryer) error {
	_, err := tx.ExecContext(ctx, `UPDATE meta SET value = value + 1 WHERE key = 'event_types_version'`)
	return err
}

// EventTypeCreate stores a new event type.
func (s *Store) EventTypeCreate(ctx context.Context, params *store.EventTypeCreateParams) (*herald.EventType, error) {
	et := params.EventType
	schema, example := store.EventTypeJSONColumns(et)
	var out *herald.EventType
	err := s.writeTx(ctx, "event type create", func(tx queryer) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM event_types WHERE name = ?`, et.Name).Scan(&one)
		if err == nil {
			return herald.Conflictf("event type %q already exists", et.Name)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO event_types (`+eventTypeColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, et.Name, et.Description, schema, example, et.Deprecated, et.Validate,
			ms(et.CreatedAt), ms(et.UpdatedAt)); err != nil {
			return err
		}
		if err := bumpEventTypesVersion(ctx, tx); err != nil {
			return err
		}
		out, err = getEventType(ctx, tx, et.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EventTypeGet returns one event type.
func (s *Store) EventTypeGet(ctx context.Context, name string) (*herald.EventType, error) {
	var out *herald.EventType
	err := s.readTx(ctx, "event type get", func(tx queryer) error {
		var err error
		out, err = getEventType(ctx, tx, name)
		return err
	})
	return out, err
}

// EventTypeList pages through event types in name order.
func (s *Store) EventTypeList(ctx context.Context, params *store.EventTypeListParams) (*store.EventTypeListResult, error) {
	limit := -1 // SQLite: no limit
	if params.Limit > 0 {
		limit = params.Limit + 1
	}
	res := &store.EventTypeListResult{}
	err := s.readTx(ctx, "event type list", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+eventTypeColumns+` FROM event_types
			WHERE name > ? AND (? OR deprecated = 0) ORDER BY name LIMIT ?`,
			params.After, params.IncludeDeprecated, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			et, err := scanEventType(rows)
			if err != nil {
				return err
			}
			res.EventTypes = append(res.EventTypes, et)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if params.Limit > 0 && len(res.EventTypes) > params.Limit {
		res.EventTypes, res.More = res.EventTypes[:params.Limit], true
	}
	return res, nil
}

// EventTypeUpdate replaces the mutable columns.
func (s *Store) EventTypeUpdate(ctx context.Context, params *store.EventTypeUpdateParams) (*herald.EventType, error) {
	et := params.EventType
	schema, example := store.EventTypeJSONColumns(et)
	var out *herald.EventType
	err := s.writeTx(ctx, "event type update", func(tx queryer) error {
		res, err := tx.ExecContext(ctx, `UPDATE event_types SET description = ?, schema = ?, example = ?,
			deprecated = ?, validate = ?, updated_at = ? WHERE name = ?`,
			et.Description, schema, example, et.Deprecated, et.Validate, ms(et.UpdatedAt), et.Name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return herald.NotFoundf("event type %q not found", et.Name)
		}
		if err := bumpEventTypesVersion(ctx, tx); err != nil {
			return err
		}
		out, err = getEventType(ctx, tx, et.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EventTypeDelete removes an event type.
func (s *Store) EventTypeDelete(ctx context.Context, name string) error {
	return s.writeTx(ctx, "event type delete", func(tx queryer) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM event_types WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return herald.NotFoundf("event type %q not found", name)
		}
		return bumpEventTypesVersion(ctx, tx)
	})
}

// EventTypesVersion returns the event types change counter.
func (s *Store) EventTypesVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.rdb.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'event_types_version'`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("sqlite: event types version: %w", unavailable(err))
	}
	return v, nil
}
