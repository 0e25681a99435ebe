package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Event types (store/eventtype.go, migration 020): schema and example as
// text, so they read back byte for byte.

const eventTypeColumns = `name, description, schema, example, deprecated, validate, created_at, updated_at`

func scanEventType(row pgx.Row) (*herald.EventType, error) {
	var (
		et                   herald.EventType
		schema, example      *string
		createdAt, updatedAt time.Time
	)
	if err := row.Scan(&et.Name, &et.Description, &schema, &example, &et.Deprecated, &et.Validate,
		&createdAt, &updatedAt); err != nil {
		return nil, err
	}
	store.EventTypeJSONFill(&et, schema, example)
	et.CreatedAt, et.UpdatedAt = createdAt.UTC(), updatedAt.UTC()
	return &et, nil
}

const bumpEventTypesVersionSQL = "UPDATE event_types_version SET version = version + 1"

// EventTypeCreate stores a new event type.
func (s *Store) EventTypeCreate(ctx context.Context, params *store.EventTypeCreateParams) (*herald.EventType, error) {
	const op = "error creating event type"
	et := params.EventType
	schema, example := store.EventTypeJSONColumns(et)
	var out *herald.EventType
	err := s.inTx(ctx, op, func(tx pgx.Tx) error {
		var err error
		out, err = scanEventType(tx.QueryRow(ctx, `INSERT INTO event_types (`+eventTypeColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+eventTypeColumns,
			et.Name, et.Description, schema, example, et.Deprecated, et.Validate, ms(et.CreatedAt), ms(et.UpdatedAt)))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return herald.Conflictf("event type %q already exists", et.Name)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, bumpEventTypesVersionSQL)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EventTypeGet returns one event type or ErrNotFound.
func (s *Store) EventTypeGet(ctx context.Context, name string) (*herald.EventType, error) {
	const op = "error reading event type"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	et, err := scanEventType(db.QueryRow(ctx, "SELECT "+eventTypeColumns+" FROM event_types WHERE name = $1", name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("event type %q not found", name)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	return et, nil
}

// EventTypeList pages through event types in name order.
func (s *Store) EventTypeList(ctx context.Context, params *store.EventTypeListParams) (*store.EventTypeListResult, error) {
	const op = "error listing event types"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	var limit *int // NULL: LIMIT ALL
	if params.Limit > 0 {
		l := params.Limit + 1
		limit = &l
	}
	rows, err := db.Query(ctx, "SELECT "+eventTypeColumns+` FROM event_types
		WHERE name > $1 AND ($2 OR NOT deprecated) ORDER BY name LIMIT $3`, params.After, params.IncludeDeprecated, limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	res := &store.EventTypeListResult{}
	for rows.Next() {
		et, err := scanEventType(rows)
		if err != nil {
			return nil, mapErr(op, err)
		}
		res.EventTypes = append(res.EventTypes, et)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	if params.Limit > 0 && len(res.EventTypes) > params.Limit {
		res.EventTypes, res.More = res.EventTypes[:params.Limit], true
	}
	return res, nil
}

// EventTypeUpdate replaces every column but name and created_at.
func (s *Store) EventTypeUpdate(ctx context.Context, params *store.EventTypeUpdateParams) (*herald.EventType, error) {
	const op = "error updating event type"
	et := params.EventType
	schema, example := store.EventTypeJSONColumns(et)
	var out *herald.EventType
	err := s.inTx(ctx, op, func(tx pgx.Tx) error {
		var err error
		out, err = scanEventType(tx.QueryRow(ctx, `UPDATE event_types SET description = $2, schema = $3,
			example = $4, deprecated = $5, validate = $6, updated_at = $7 WHERE name = $1 RETURNING `+eventTypeColumns,
			et.Name, et.Description, schema, example, et.Deprecated, et.Validate, ms(et.UpdatedAt)))
		if errors.Is(err, pgx.ErrNoRows) {
			return herald.NotFoundf("event type %q not found", et.Name)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, bumpEventTypesVersionSQL)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EventTypeDelete removes an event type.
func (s *Store) EventTypeDelete(ctx context.Context, name string) error {
	return s.inTx(ctx, "error deleting event type", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM event_types WHERE name = $1", name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return herald.NotFoundf("event type %q not found", name)
		}
		_, err = tx.Exec(ctx, bumpEventTypesVersionSQL)
		return err
	})
}

// EventTypesVersion returns the event types change counter.
func (s *Store) EventTypesVersion(ctx context.Context) (int64, error) {
	const op = "error reading event types version"
	db, err := s.db(op)
	if err != nil {
		return 0, err
	}
	var v int64
	if err := db.QueryRow(ctx, "SELECT version FROM event_types_version").Scan(&v); err != nil {
		return 0, mapErr(op, err)
	}
	return v, nil
}
