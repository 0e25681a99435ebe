package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// Sources (store/source.go, migration 017): config and mapping as JSON
// text (store.SourceColumns). Every write runs in the single writer's
// transaction, which orders it with any ConnectionDelete and makes the
// lease's check-and-set atomic. Reports and leases use queueTx: losing the
// last of them to a power cut costs a status figure or a lease the next
// round takes again.

const sourceColumns = `name, type, connection, config, mapping, tenant, ordered, enabled, created_at, updated_at`

func scanSource(row scanner) (*herald.Source, error) {
	var (
		src                  herald.Source
		typ, config          string
		mapping              sql.NullString
		createdAt, updatedAt int64
	)
	if err := row.Scan(&src.Name, &typ, &src.Connection, &config, &mapping, &src.Tenant, &src.Ordered,
		&src.Enabled, &createdAt, &updatedAt); err != nil {
		return nil, err
	}
	src.Type = herald.DestinationType(typ)
	src.CreatedAt, src.UpdatedAt = fromMS(createdAt), fromMS(updatedAt)
	var m *string
	if mapping.Valid {
		m = &mapping.String
	}
	if err := store.SourceFill(&src, config, m); err != nil {
		return nil, err
	}
	return &src, nil
}

func getSource(ctx context.Context, q queryer, name string) (*herald.Source, error) {
	src, err := scanSource(q.QueryRowContext(ctx, `SELECT `+sourceColumns+` FROM sources WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.NotFoundf("source %q not found", name)
	}
	return src, err
}

// sourceConnectionExists fails with store.ErrSourceConnectionMissing
// unless the connection exists; run in the source write's transaction.
func sourceConnectionExists(ctx context.Context, tx queryer, name string) error {
	err := connectionExists(ctx, tx, &name)
	var he *herald.Error
	if errors.As(err, &he) && he.Code == herald.CodeInvalidField {
		return store.ErrSourceConnectionMissing(name)
	}
	return err
}

func bumpSourcesVersion(ctx context.Context, tx queryer) error {
	_, err := tx.ExecContext(ctx, `UPDATE meta SET value = value + 1 WHERE key = 'sources_version'`)
	return err
}

// sourceExists reports whether the source exists.
func sourceExists(ctx context.Context, q queryer, name string) (bool, error) {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM sources WHERE name = ?`, name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// SourceCreate stores a new source.
func (s *Store) SourceCreate(ctx context.Context, params *store.SourceCreateParams) (*herald.Source, error) {
	src := params.Source
	config, mapping, err := store.SourceColumns(src)
	if err != nil {
		return nil, fmt.Errorf("sqlite: source create: %w", err)
	}
	var out *herald.Source
	err = s.writeTx(ctx, "source create", func(tx queryer) error {
		if err := sourceConnectionExists(ctx, tx, src.Connection); err != nil {
			return err
		}
		if ok, err := sourceExists(ctx, tx, src.Name); err != nil {
			return err
		} else if ok {
			return herald.Conflictf("source %q already exists", src.Name)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sources (`+sourceColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, src.Name, string(src.Type), src.Connection, config, mapping,
			src.Tenant, src.Ordered, src.Enabled, ms(src.CreatedAt), ms(src.UpdatedAt)); err != nil {
			return err
		}
		if err := bumpSourcesVersion(ctx, tx); err != nil {
			return err
		}
		out, err = getSource(ctx, tx, src.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SourceGet returns one source or ErrNotFound.
func (s *Store) SourceGet(ctx context.Context, name string) (*herald.Source, error) {
	var out *herald.Source
	err := s.readTx(ctx, "source get", func(tx queryer) error {
		var err error
		out, err = getSource(ctx, tx, name)
		return err
	})
	return out, err
}

// SourceList pages through sources in name order.
func (s *Store) SourceList(ctx context.Context, params *store.SourceListParams) (*store.SourceListResult, error) {
	limit := -1 // SQLite: no limit
	if params.Limit > 0 {
		limit = params.Limit + 1
	}
	res := &store.SourceListResult{}
	err := s.readTx(ctx, "source list", func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+sourceColumns+` FROM sources
			WHERE name > ? ORDER BY name LIMIT ?`, params.After, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			src, err := scanSource(rows)
			if err != nil {
				return err
			}
			res.Sources = append(res.Sources, src)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	if params.Limit > 0 && len(res.Sources) > params.Limit {
		res.Sources, res.More = res.Sources[:params.Limit], true
	}
	return res, nil
}

// SourceUpdate replaces every field but name and created_at.
func (s *Store) SourceUpdate(ctx context.Context, params *store.SourceUpdateParams) (*herald.Source, error) {
	src := params.Source
	config, mapping, err := store.SourceColumns(src)
	if err != nil {
		return nil, fmt.Errorf("sqlite: source update: %w", err)
	}
	var out *herald.Source
	err = s.writeTx(ctx, "source update", func(tx queryer) error {
		if ok, err := sourceExists(ctx, tx, src.Name); err != nil {
			return err
		} else if !ok {
			return herald.NotFoundf("source %q not found", src.Name)
		}
		if err := sourceConnectionExists(ctx, tx, src.Connection); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sources SET type = ?, connection = ?, config = ?, mapping = ?,
			tenant = ?, ordered = ?, enabled = ?, updated_at = ? WHERE name = ?`,
			string(src.Type), src.Connection, config, mapping, src.Tenant, src.Ordered, src.Enabled,
			ms(src.UpdatedAt), src.Name); err != nil {
			return err
		}
		if err := bumpSourcesVersion(ctx, tx); err != nil {
			return err
		}
		out, err = getSource(ctx, tx, src.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SourceDelete removes a source with its node rows, rejects and lease
// (those first: they reference it).
func (s *Store) SourceDelete(ctx context.Context, name string) error {
	return s.writeTx(ctx, "source delete", func(tx queryer) error {
		for _, table := range []string{"source_nodes", "source_rejects", "source_leases"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE source = ?`, name); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM sources WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return herald.NotFoundf("source %q not found", name)
		}
		return bumpSourcesVersion(ctx, tx)
	})
}

// SourcesVersion returns the sources change counter.
func (s *Store) SourcesVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.rdb.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'sources_version'`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("sqlite: sources version: %w", unavailable(err))
	}
	return v, nil
}

// SourceReport adds one node's report to its row and appends its rejects,
// trimming the source's to the newest herald.SourceRecentRejects.
func (s *Store) SourceReport(ctx context.Context, params *store.SourceReportParams) error {
	rejects := store.SourceReportRejects(params)
	return s.queueTx(ctx, "source report", func(tx queryer) error {
		if ok, err := sourceExists(ctx, tx, params.Source); err != nil || !ok {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO source_nodes (source, node, state, consumed, duplicates,
			rejected, last_error, pending, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (source, node) DO UPDATE SET state = excluded.state,
				consumed = consumed + excluded.consumed, duplicates = duplicates + excluded.duplicates,
				rejected = rejected + excluded.rejected, last_error = excluded.last_error,
				pending = excluded.pending, updated_at = excluded.updated_at`,
			params.Source, params.Node, params.State, params.Consumed, params.Duplicates, params.Rejected,
			params.LastError, params.Pending, ms(params.Now)); err != nil {
			return err
		}
		if len(rejects) == 0 {
			return nil
		}
		var q strings.Builder
		q.WriteString(`INSERT INTO source_rejects (source, node, at, reason, message, message_id, excerpt) VALUES `)
		args := make([]any, 0, 7*len(rejects))
		for i, r := range rejects {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?)")
			args = append(args, params.Source, r.Node, ms(r.At), r.Reason, r.Message, r.MessageID, r.Excerpt)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM source_rejects WHERE source = ?1 AND id <
			(SELECT id FROM source_rejects WHERE source = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)`,
			params.Source, store.SourceRejectsTrimOffset)
		return err
	})
}

// SourceStatusGet combines the source's node rows and newest rejects.
func (s *Store) SourceStatusGet(ctx context.Context, params *store.SourceStatusGetParams) (*herald.SourceStatus, error) {
	var (
		nodes   []herald.SourceNodeStatus
		rejects []herald.SourceReject
	)
	err := s.readTx(ctx, "source status", func(tx queryer) error {
		if ok, err := sourceExists(ctx, tx, params.Name); err != nil {
			return err
		} else if !ok {
			return herald.NotFoundf("source %q not found", params.Name)
		}
		var err error
		if nodes, err = sourceNodes(ctx, tx, params.Name); err != nil {
			return err
		}
		rejects, err = sourceRejects(ctx, tx, params.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	st := herald.CombineSourceStatus(nodes, rejects, params.Now)
	return &st, nil
}

// sourceNodes returns the source's node rows in node order.
func sourceNodes(ctx context.Context, tx queryer, name string) ([]herald.SourceNodeStatus, error) {
	rows, err := tx.QueryContext(ctx, `SELECT node, state, consumed, duplicates, rejected, last_error, pending,
		updated_at FROM source_nodes WHERE source = ? ORDER BY node`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []herald.SourceNodeStatus
	for rows.Next() {
		var (
			n         herald.SourceNodeStatus
			pending   sql.NullInt64
			updatedAt int64
		)
		if err := rows.Scan(&n.Node, &n.State, &n.Consumed, &n.Duplicates, &n.Rejected, &n.LastError,
			&pending, &updatedAt); err != nil {
			return nil, err
		}
		if pending.Valid {
			n.Pending = &pending.Int64
		}
		n.UpdatedAt = fromMS(updatedAt)
		out = append(out, n)
	}
	return out, rows.Err()
}

// sourceRejects returns the source's newest rejects, newest first (at most
// herald.SourceRecentRejects, whatever a report left).
func sourceRejects(ctx context.Context, tx queryer, name string) ([]herald.SourceReject, error) {
	rows, err := tx.QueryContext(ctx, `SELECT at, node, reason, message, message_id, excerpt
		FROM source_rejects WHERE source = ? ORDER BY id DESC LIMIT ?`, name, herald.SourceRecentRejects)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []herald.SourceReject
	for rows.Next() {
		var (
			r  herald.SourceReject
			at int64
		)
		if err := rows.Scan(&at, &r.Node, &r.Reason, &r.Message, &r.MessageID, &r.Excerpt); err != nil {
			return nil, err
		}
		r.At = fromMS(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// SourceLeaseAcquire takes, renews or keeps away the source's lease in one
// upsert: the single writer makes it atomic.
func (s *Store) SourceLeaseAcquire(ctx context.Context, params *store.SourceLeaseParams) (bool, error) {
	held := false
	err := s.queueTx(ctx, "source lease acquire", func(tx queryer) error {
		// WHERE EXISTS: no lease for a source that does not exist (it
		// also tells SQLite's parser the SELECT ends before ON CONFLICT).
		var node string
		err := tx.QueryRowContext(ctx, `INSERT INTO source_leases (source, node, expires_at)
			SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM sources WHERE name = ?1)
			ON CONFLICT (source) DO UPDATE SET node = excluded.node, expires_at = excluded.expires_at
				WHERE source_leases.expires_at <= ?4 OR source_leases.node = excluded.node
			RETURNING node`,
			params.Source, params.Node, ms(params.Now.Add(params.TTL)), ms(params.Now)).Scan(&node)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		held = err == nil && node == params.Node
		return err
	})
	return held, err
}

// SourceLeaseRelease ends Node's lease of the source if it holds it.
func (s *Store) SourceLeaseRelease(ctx context.Context, params *store.SourceLeaseParams) error {
	return s.queueTx(ctx, "source lease release", func(tx queryer) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM source_leases WHERE source = ? AND node = ?`,
			params.Source, params.Node)
		return err
	})
}
