package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

// Connections (store/connection.go): url sealed with the store's ring, tls
// as jsonb, tenants as text[].

const connectionColumns = `name, type, url, tls::text, tenants, all_tenants, created_at, updated_at`

const insertConnectionColumns = `name, type, url, tls, tenants, all_tenants, created_at, updated_at`

// connectionArgs are the url and tls column values of c.
func connectionArgs(keys *seal.Ring, c *herald.Connection) (url string, tls *string, err error) {
	url, err = keys.Seal(c.URL, store.ConnectionAAD(c.Name))
	if err != nil {
		return "", nil, err
	}
	if c.TLS != nil {
		b, err := json.Marshal(c.TLS)
		if err != nil {
			return "", nil, err
		}
		v := string(b)
		tls = &v
	}
	return url, tls, nil
}

func tenantsArg(c *herald.Connection) []string {
	if c.Tenants == nil {
		return []string{}
	}
	return c.Tenants
}

func scanConnection(row pgx.Row, keys *seal.Ring) (*herald.Connection, error) {
	var (
		c         herald.Connection
		typ, url  string
		tls       *string
		createdAt time.Time
		updatedAt time.Time
	)
	if err := row.Scan(&c.Name, &typ, &url, &tls, &c.Tenants, &c.AllTenants, &createdAt, &updatedAt); err != nil {
		return nil, err
	}
	c.Type = herald.DestinationType(typ)
	c.URL = store.ConnectionURLOpen(keys, url, c.Name)
	c.CreatedAt, c.UpdatedAt = createdAt.UTC(), updatedAt.UTC()
	if tls != nil {
		c.TLS = &herald.ConnectionTLS{}
		if err := json.Unmarshal([]byte(*tls), c.TLS); err != nil {
			return nil, fmt.Errorf("connection %s tls: %w", c.Name, err)
		}
	}
	if c.Tenants == nil {
		c.Tenants = []string{}
	}
	return &c, nil
}

// shareConnection locks the connection sub's destination names FOR KEY
// SHARE, or fails with store.ErrConnectionMissing. ConnectionDelete locks
// the row FOR UPDATE, so of a concurrent subscription write and delete one
// waits for the other: either the delete's in-use check (a later
// statement, with a fresh snapshot) sees the subscription, or the write
// finds the connection gone.
func shareConnection(ctx context.Context, tx pgx.Tx, sub *herald.Subscription) error {
	d := sub.Dest()
	if d.Connection == "" || !d.Type.UsesConnection() {
		return nil
	}
	var one int
	err := tx.QueryRow(ctx, "SELECT 1 FROM connections WHERE name = $1 FOR KEY SHARE", d.Connection).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrConnectionMissing(d.Connection)
	}
	return err
}

// ConnectionCreate stores a new connection.
func (s *Store) ConnectionCreate(ctx context.Context, params *store.ConnectionCreateParams) (*herald.Connection, error) {
	const op = "error creating connection"
	c := params.Connection
	url, tls, err := connectionArgs(s.keys, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	out, err := scanConnection(db.QueryRow(ctx, `INSERT INTO connections (`+insertConnectionColumns+`)
		VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8) RETURNING `+connectionColumns,
		c.Name, string(c.Type), url, tls, tenantsArg(c), c.AllTenants, ms(c.CreatedAt), ms(c.UpdatedAt)), s.keys)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return nil, herald.Conflictf("connection %q already exists", c.Name)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// ConnectionGet returns one connection with its URL opened.
func (s *Store) ConnectionGet(ctx context.Context, name string) (*herald.Connection, error) {
	const op = "error reading connection"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	c, err := scanConnection(db.QueryRow(ctx, "SELECT "+connectionColumns+" FROM connections WHERE name = $1", name), s.keys)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("connection %q not found", name)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	return c, nil
}

// ConnectionList pages through connections in name order.
func (s *Store) ConnectionList(ctx context.Context, params *store.ConnectionListParams) (*store.ConnectionListResult, error) {
	const op = "error listing connections"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	limit := store.PageLimit(params.Limit)
	rows, err := db.Query(ctx, "SELECT "+connectionColumns+` FROM connections
		WHERE name > $1 ORDER BY name LIMIT $2`, params.After, limit+1)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	res := &store.ConnectionListResult{}
	for rows.Next() {
		c, err := scanConnection(rows, s.keys)
		if err != nil {
			return nil, mapErr(op, err)
		}
		res.Connections = append(res.Connections, c)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	if len(res.Connections) > limit {
		res.Connections, res.More = res.Connections[:limit], true
	}
	return res, nil
}

// ConnectionUpdate replaces url, tls, tenants, all_tenants and updated_at.
func (s *Store) ConnectionUpdate(ctx context.Context, params *store.ConnectionUpdateParams) (*herald.Connection, error) {
	const op = "error updating connection"
	c := params.Connection
	url, tls, err := connectionArgs(s.keys, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	out, err := scanConnection(db.QueryRow(ctx, `UPDATE connections SET url = $2, tls = $3::jsonb, tenants = $4,
		all_tenants = $5, updated_at = $6 WHERE name = $1 RETURNING `+connectionColumns,
		c.Name, url, tls, tenantsArg(c), c.AllTenants, ms(c.UpdatedAt)), s.keys)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("connection %q not found", c.Name)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// ConnectionDelete removes a connection no live subscription and no
// source names. It locks the row FOR UPDATE first (see shareConnection and
// shareSourceConnection), then looks for a user through the
// subscriptions_connection and sources_connection indexes.
func (s *Store) ConnectionDelete(ctx context.Context, params *store.ConnectionDeleteParams) error {
	return s.inTx(ctx, "error deleting connection", func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM connections WHERE name = $1 FOR UPDATE", params.Name).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return herald.NotFoundf("connection %q not found", params.Name)
		}
		if err != nil {
			return err
		}
		var subID string
		err = tx.QueryRow(ctx, `SELECT id FROM subscriptions WHERE connection = $1 AND deleted_at IS NULL
			ORDER BY id LIMIT 1`, params.Name).Scan(&subID)
		if err == nil {
			return &store.ConnectionInUseError{Name: params.Name, SubscriptionID: subID}
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var source string
		err = tx.QueryRow(ctx, "SELECT name FROM sources WHERE connection = $1 ORDER BY name LIMIT 1",
			params.Name).Scan(&source)
		if err == nil {
			return &store.ConnectionInUseError{Name: params.Name, SourceName: source}
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		_, err = tx.Exec(ctx, "DELETE FROM connections WHERE name = $1", params.Name)
		return err
	})
}
