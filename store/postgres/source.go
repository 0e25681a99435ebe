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

// Sources (store/source.go, migration 017): config and mapping as jsonb
// (store.SourceColumns). A source write locks its connection FOR KEY SHARE
// (as shareConnection does for subscriptions), and a report or lease
// write holds the source row the same way through its foreign key, so a
// concurrent ConnectionDelete or SourceDelete (FOR UPDATE, the row's
// delete) waits for it or is waited for: nothing is left naming a row that
// is gone.

const sourceColumns = `name, type, connection, config::text, mapping::text, tenant, ordered, enabled, created_at, updated_at`

func scanSource(row pgx.Row) (*herald.Source, error) {
	var (
		src                  herald.Source
		typ, config          string
		mapping              *string
		createdAt, updatedAt time.Time
	)
	if err := row.Scan(&src.Name, &typ, &src.Connection, &config, &mapping, &src.Tenant, &src.Ordered,
		&src.Enabled, &createdAt, &updatedAt); err != nil {
		return nil, err
	}
	src.Type = herald.DestinationType(typ)
	src.CreatedAt, src.UpdatedAt = createdAt.UTC(), updatedAt.UTC()
	if err := store.SourceFill(&src, config, mapping); err != nil {
		return nil, err
	}
	return &src, nil
}

// shareSourceConnection locks the connection FOR KEY SHARE, or fails
// with store.ErrSourceConnectionMissing (see shareConnection).
func shareSourceConnection(ctx context.Context, tx pgx.Tx, name string) error {
	var one int
	err := tx.QueryRow(ctx, "SELECT 1 FROM connections WHERE name = $1 FOR KEY SHARE", name).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrSourceConnectionMissing(name)
	}
	return err
}

const bumpSourcesVersionSQL = "UPDATE sources_version SET version = version + 1"

// SourceCreate stores a new source.
func (s *Store) SourceCreate(ctx context.Context, params *store.SourceCreateParams) (*herald.Source, error) {
	const op = "error creating source"
	src := params.Source
	config, mapping, err := store.SourceColumns(src)
	if err != nil {
		return nil, mapErr(op, err)
	}
	var out *herald.Source
	err = s.inTx(ctx, op, func(tx pgx.Tx) error {
		if err := shareSourceConnection(ctx, tx, src.Connection); err != nil {
			return err
		}
		var err error
		out, err = scanSource(tx.QueryRow(ctx, `INSERT INTO sources (name, type, connection, config, mapping,
			tenant, ordered, enabled, created_at, updated_at)
			VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6, $7, $8, $9, $10) RETURNING `+sourceColumns,
			src.Name, string(src.Type), src.Connection, config, mapping, src.Tenant, src.Ordered, src.Enabled,
			ms(src.CreatedAt), ms(src.UpdatedAt)))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return herald.Conflictf("source %q already exists", src.Name)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, bumpSourcesVersionSQL)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SourceGet returns one source or ErrNotFound.
func (s *Store) SourceGet(ctx context.Context, name string) (*herald.Source, error) {
	const op = "error reading source"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	src, err := scanSource(db.QueryRow(ctx, "SELECT "+sourceColumns+" FROM sources WHERE name = $1", name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.NotFoundf("source %q not found", name)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	return src, nil
}

// SourceList pages through sources in name order.
func (s *Store) SourceList(ctx context.Context, params *store.SourceListParams) (*store.SourceListResult, error) {
	const op = "error listing sources"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	var limit *int // NULL: LIMIT ALL
	if params.Limit > 0 {
		l := params.Limit + 1
		limit = &l
	}
	rows, err := db.Query(ctx, "SELECT "+sourceColumns+` FROM sources
		WHERE name > $1 ORDER BY name LIMIT $2`, params.After, limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	res := &store.SourceListResult{}
	for rows.Next() {
		src, err := scanSource(rows)
		if err != nil {
			return nil, mapErr(op, err)
		}
		res.Sources = append(res.Sources, src)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	if params.Limit > 0 && len(res.Sources) > params.Limit {
		res.Sources, res.More = res.Sources[:params.Limit], true
	}
	return res, nil
}

// SourceUpdate replaces every column but name and created_at.
func (s *Store) SourceUpdate(ctx context.Context, params *store.SourceUpdateParams) (*herald.Source, error) {
	const op = "error updating source"
	src := params.Source
	config, mapping, err := store.SourceColumns(src)
	if err != nil {
		return nil, mapErr(op, err)
	}
	var out *herald.Source
	err = s.inTx(ctx, op, func(tx pgx.Tx) error {
		// Not found before a missing connection, as SQLite answers.
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM sources WHERE name = $1", src.Name).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return herald.NotFoundf("source %q not found", src.Name)
		}
		if err != nil {
			return err
		}
		if err := shareSourceConnection(ctx, tx, src.Connection); err != nil {
			return err
		}
		out, err = scanSource(tx.QueryRow(ctx, `UPDATE sources SET type = $2, connection = $3,
			config = $4::jsonb, mapping = $5::jsonb, tenant = $6, ordered = $7, enabled = $8, updated_at = $9
			WHERE name = $1 RETURNING `+sourceColumns,
			src.Name, string(src.Type), src.Connection, config, mapping, src.Tenant, src.Ordered, src.Enabled,
			ms(src.UpdatedAt)))
		if errors.Is(err, pgx.ErrNoRows) { // deleted since the check
			return herald.NotFoundf("source %q not found", src.Name)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, bumpSourcesVersionSQL)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SourceDelete removes a source with its node rows, rejects and lease. The
// source row goes first: its lock makes a report or lease write in flight
// finish before the later statements, which then see its rows.
func (s *Store) SourceDelete(ctx context.Context, name string) error {
	return s.inTx(ctx, "error deleting source", func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM sources WHERE name = $1 FOR UPDATE", name).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return herald.NotFoundf("source %q not found", name)
		}
		if err != nil {
			return err
		}
		for _, table := range []string{"source_nodes", "source_rejects", "source_leases"} {
			if _, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE source = $1", name); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "DELETE FROM sources WHERE name = $1", name); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, bumpSourcesVersionSQL)
		return err
	})
}

// SourcesVersion returns the sources change counter.
func (s *Store) SourcesVersion(ctx context.Context) (int64, error) {
	const op = "error reading sources version"
	db, err := s.db(op)
	if err != nil {
		return 0, err
	}
	var v int64
	if err := db.QueryRow(ctx, "SELECT version FROM sources_version").Scan(&v); err != nil {
		return 0, mapErr(op, err)
	}
	return v, nil
}

// SourceReport adds one node's report to its row and appends its rejects,
// trimming the source's to the newest herald.SourceRecentRejects.
func (s *Store) SourceReport(ctx context.Context, params *store.SourceReportParams) error {
	rejects := store.SourceReportRejects(params)
	return s.inTx(ctx, "error recording source report", func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM sources WHERE name = $1 FOR KEY SHARE", params.Source).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // deleted: the report is moot
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO source_nodes AS n (source, node, state, consumed, duplicates,
			rejected, last_error, pending, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (source, node) DO UPDATE SET state = excluded.state,
				consumed = n.consumed + excluded.consumed, duplicates = n.duplicates + excluded.duplicates,
				rejected = n.rejected + excluded.rejected, last_error = excluded.last_error,
				pending = excluded.pending, updated_at = excluded.updated_at`,
			params.Source, params.Node, params.State, params.Consumed, params.Duplicates, params.Rejected,
			params.LastError, params.Pending, ms(params.Now)); err != nil {
			return err
		}
		if len(rejects) == 0 {
			return nil
		}
		at := make([]time.Time, len(rejects))
		reason := make([]string, len(rejects))
		message := make([]string, len(rejects))
		messageID := make([]string, len(rejects))
		excerpt := make([]string, len(rejects))
		for i, r := range rejects {
			at[i], reason[i], message[i], messageID[i], excerpt[i] = ms(r.At), r.Reason, r.Message, r.MessageID, r.Excerpt
		}
		// WITH ORDINALITY ... ORDER BY: ids follow the report's order.
		if _, err := tx.Exec(ctx, `INSERT INTO source_rejects (source, node, at, reason, message, message_id, excerpt)
			SELECT $1, $2, r.at, r.reason, r.message, r.message_id, r.excerpt
			FROM unnest($3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[])
				WITH ORDINALITY AS r (at, reason, message, message_id, excerpt, i)
			ORDER BY r.i`,
			params.Source, params.Node, at, reason, message, messageID, excerpt); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM source_rejects WHERE source = $1 AND id <
			(SELECT id FROM source_rejects WHERE source = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`,
			params.Source, store.SourceRejectsTrimOffset)
		return err
	})
}

// SourceStatusGet combines the source's node rows and newest rejects, read
// in one snapshot.
func (s *Store) SourceStatusGet(ctx context.Context, params *store.SourceStatusGetParams) (*herald.SourceStatus, error) {
	var (
		nodes   []herald.SourceNodeStatus
		rejects []herald.SourceReject
	)
	err := s.inTx(ctx, "error reading source status", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
			return err
		}
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM sources WHERE name = $1", params.Name).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return herald.NotFoundf("source %q not found", params.Name)
		}
		if err != nil {
			return err
		}
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
func sourceNodes(ctx context.Context, tx pgx.Tx, name string) ([]herald.SourceNodeStatus, error) {
	rows, err := tx.Query(ctx, `SELECT node, state, consumed, duplicates, rejected, last_error, pending,
		updated_at FROM source_nodes WHERE source = $1 ORDER BY node`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []herald.SourceNodeStatus
	for rows.Next() {
		var n herald.SourceNodeStatus
		if err := rows.Scan(&n.Node, &n.State, &n.Consumed, &n.Duplicates, &n.Rejected, &n.LastError,
			&n.Pending, &n.UpdatedAt); err != nil {
			return nil, err
		}
		n.UpdatedAt = n.UpdatedAt.UTC()
		out = append(out, n)
	}
	return out, rows.Err()
}

// sourceRejects returns the source's newest rejects, newest first (at most
// herald.SourceRecentRejects, whatever concurrent reports left).
func sourceRejects(ctx context.Context, tx pgx.Tx, name string) ([]herald.SourceReject, error) {
	rows, err := tx.Query(ctx, `SELECT at, node, reason, message, message_id, excerpt
		FROM source_rejects WHERE source = $1 ORDER BY id DESC LIMIT $2`, name, herald.SourceRecentRejects)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []herald.SourceReject
	for rows.Next() {
		var r herald.SourceReject
		if err := rows.Scan(&r.At, &r.Node, &r.Reason, &r.Message, &r.MessageID, &r.Excerpt); err != nil {
			return nil, err
		}
		r.At = r.At.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// SourceLeaseAcquire takes, renews or keeps away the source's lease in one
// statement. Two nodes inserting a free lease at once: the second waits on
// the first's row, then re-checks the WHERE against it (unexpired, another
// node) and updates nothing, so exactly one returns its node.
func (s *Store) SourceLeaseAcquire(ctx context.Context, params *store.SourceLeaseParams) (bool, error) {
	const op = "error acquiring source lease"
	db, err := s.db(op)
	if err != nil {
		return false, err
	}
	var node string
	err = retryMoved(ctx, func() error {
		return db.QueryRow(ctx, `INSERT INTO source_leases AS l (source, node, expires_at)
			SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM sources WHERE name = $1)
			ON CONFLICT (source) DO UPDATE SET node = excluded.node, expires_at = excluded.expires_at
				WHERE l.expires_at <= $4 OR l.node = excluded.node
			RETURNING node`,
			params.Source, params.Node, ms(params.Now.Add(params.TTL)), ms(params.Now)).Scan(&node)
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case errors.As(err, &pgErr) && pgErr.Code == "23503":
		return false, nil // the source was deleted meanwhile
	case err != nil:
		return false, mapErr(op, err)
	}
	return node == params.Node, nil
}

// SourceLeaseRelease ends Node's lease of the source if it holds it.
func (s *Store) SourceLeaseRelease(ctx context.Context, params *store.SourceLeaseParams) error {
	const op = "error releasing source lease"
	db, err := s.db(op)
	if err != nil {
		return err
	}
	_, err = execMoved(ctx, db, "DELETE FROM source_leases WHERE source = $1 AND node = $2",
		params.Source, params.Node)
	return mapErr(op, err)
}
