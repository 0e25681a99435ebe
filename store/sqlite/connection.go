package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
)

// Connections (store/connection.go): url sealed with the store's ring, tls
// and tenants as JSON text.

const connectionColumns = `name, type, url, tls, tenants, all_tenants, created_at, updated_at`

// connectionArgs are the url, tls and tenants column values of c.
func connectionArgs(keys *seal.Ring, c *herald.Connection) (url string, tls, tenants any, err error) {
	url, err = keys.Seal(c.URL, store.ConnectionAAD(c.Name))
	if err != nil {
		return "", nil, nil, err
	}
	if c.TLS != nil {
		b, err := json.Marshal(c.TLS)
		if err != nil {
			return "", nil, nil, err
		}
		tls = string(b)
	}
	b, err := json.Marshal(nonNil(c.Tenants))
	if err != nil {
		return "", nil, nil, err
	}
	return url, tls, string(b), nil
}

func scanConnection(row scanner, keys *seal.Ring) (*herald.Connection, error) {
	var (
		c                    herald.Connection
		typ, url, tenants    string
		tls                  sql.NullString
		createdAt, updatedAt int64
	)
	if err := row.Scan(&c.Name, &typ, &url, &tls, &tenants, &c.AllTenants, &createdAt, &updatedAt); err != nil {
		return nil, err
	}
	c.Type = herald.DestinationType(typ)
	c.URL = store.ConnectionURLOpen(keys, url, c.Name)
	c.CreatedAt, c.UpdatedAt = fromMS(createdAt), fromMS(updatedAt)
	if tls.Valid {
		c.TLS = &herald.ConnectionTLS{}
		if err := json.Unmarshal([]byte(tls.String), c.TLS); err != nil {
			return nil, fmt.Errorf("connection %s tls: %w", c.Name, err)
		}
	}
	if err := json.Unmarshal([]byte(tenants), &c.Tenants); err != nil {
		return nil, fmt.Errorf("connection %s tenants: %w", c.Name, err)
	}
	return &c, nil
}

func getConnection(ctx context.Context, q queryer, keys *seal.Ring, name string) (*herald.Connection, error) {
	c, err := scanConnection(q.QueryRowContext(ctx, `SELECT `+connectionColumns+` FROM connections WHERE name = ?`, name), keys)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.NotFoundf("connection %q not found", name)
	}
	return c, err
}

// connectionExists fails with store.ErrConnectionMissing unless the
// connection named *name exists (nil name: nothing to check). Run inside
// the subscription write's transaction: SQLite's single writer orders it
// with any ConnectionDelete.
func connectionExists(ctx context.Context, tx queryer, name *string) error {
	if name == nil {
		return nil
	}
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM connections WHERE name = ?`, *name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrConnectionMissing(*name)
	}
	return err
}

// ConnectionCreate stores a new connection.
func (s *Store) ConnectionCreate(ctx context.Context, params *store.ConnectionCreateParams) (*herald.Connection, error) {
	c := params.Connection
	url, tls, tenants, err := connectionArgs(s.keys, c)
	if err != nil {
		return nil, fmt.Errorf("sqlite: connection create: %w", err)
	}
	var out *herald.Connection
	err = s.writeTx(ctx, "connection create", func(tx queryer) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM connections WHERE name = ?`, c.Name).Scan(&one)
		if err == nil {
			return herald.Conflictf("connection %q already exists", c.Name)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO connections (`+connectionColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, c.Name, string(c.Type), url, tls, tenants, c.AllTenants,
			ms(c.CreatedAt), ms(c.UpdatedAt)); err != nil {
			return err
		}
		out, err = getConnection(ctx, tx, s.keys, c.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ConnectionGet returns one connection with its URL opened.
func (s *Store) ConnectionGet(ctx context.Context, name string) (*herald.Connection, error) {
	var out *herald.Connection
	err := s.readTx(ctx, "connection get", func(tx queryer) error {
		var err error
		out, err = getConnection(ctx, tx, s.keys, name)
		return err
	})
	return out, err
}

// ConnectionList pages through connections in name order.
func (s *Store) ConnectionList(ctx context.Context, params *store.ConnectionListParams) (*store.ConnectionListResult, error) {
	limit := store.PageLimit(params.Limit)
	res := &store.ConnectionListResult{}
	err := s.readTx(ctx, "connection list", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+connectionColumns+` FROM connections
			WHERE name > ? ORDER BY name LIMIT ?`, params.After, limit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c, err := scanConnection(rows, s.keys)
			if err != nil {
				return err
			}
			res.Connections = append(res.Connections, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if len(res.Connections) > limit {
		res.Connections, res.More = res.Connections[:limit], true
	}
	return res, nil
}

// ConnectionUpdate replaces url, tls, tenants, all_tenants and updated_at.
func (s *Store) ConnectionUpdate(ctx context.Context, params *store.ConnectionUpdateParams) (*herald.Connection, error) {
	c := params.Connection
	url, tls, tenants, err := connectionArgs(s.keys, c)
	if err != nil {
		return nil, fmt.Errorf("sqlite: connection update: %w", err)
	}
	var out *herald.Connection
	err = s.writeTx(ctx, "connection update", func(tx queryer) error {
		res, err := tx.ExecContext(ctx, `UPDATE connections SET url = ?, tls = ?, tenants = ?, all_tenants = ?,
			updated_at = ? WHERE name = ?`, url, tls, tenants, c.AllTenants, ms(c.UpdatedAt), c.Name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return herald.NotFoundf("connection %q not found", c.Name)
		}
		out, err = getConnection(ctx, tx, s.keys, c.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ConnectionDelete removes a connection no live subscription and no
// source names.
func (s *Store) ConnectionDelete(ctx context.Context, params *store.ConnectionDeleteParams) error {
	return s.writeTx(ctx, "connection delete", func(tx queryer) error {
		var subID string
		err := tx.QueryRowContext(ctx, `SELECT id FROM subscriptions
			WHERE connection = ? AND deleted_at IS NULL ORDER BY id LIMIT 1`, params.Name).Scan(&subID)
		if err == nil {
			return &store.ConnectionInUseError{Name: params.Name, SubscriptionID: subID}
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var source string
		err = tx.QueryRowContext(ctx, `SELECT name FROM sources WHERE connection = ? ORDER BY name LIMIT 1`,
			params.Name).Scan(&source)
		if err == nil {
			return &store.ConnectionInUseError{Name: params.Name, SourceName: source}
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM connections WHERE name = ?`, params.Name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return herald.NotFoundf("connection %q not found", params.Name)
		}
		return nil
	})
}
