package sqlite

import (
	"context"
	"errors"
)

// AttemptPlantOrphan stores an attempt for a delivery id that names no
// delivery, as a database edited with foreign keys off may hold
// (storetest.OrphanAttemptPlanter). It turns the writer's foreign keys off
// for the insert (the pragma is a no-op inside a transaction).
func (s *Store) AttemptPlantOrphan(ctx context.Context, deliveryID string) (err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return err
	}
	defer func() {
		_, ferr := conn.ExecContext(ctx, `PRAGMA foreign_keys = ON`)
		err = errors.Join(err, ferr)
	}()
	_, err = conn.ExecContext(ctx, `INSERT INTO attempts (delivery_id, n, at, duration_ms, status, error, error_message, tier)
		VALUES (?, 1, 0, 5, 500, 'http_status', 'endpoint answered 500', 0)`, deliveryID)
	return err
}

// RawSecrets reads the secret column as stored (storetest.SecretsBackend).
func (s *Store) RawSecrets(ctx context.Context) ([]string, error) {
	return queryStrings(ctx, s.rdb, `SELECT secret FROM subscription_secrets ORDER BY id`)
}

// RawConnectionURLs reads the url column of connections as stored
// (storetest.SecretsBackend).
func (s *Store) RawConnectionURLs(ctx context.Context) ([]string, error) {
	return queryStrings(ctx, s.rdb, `SELECT url FROM connections ORDER BY name`)
}

// SourceRejectsStored counts the rejects rows of a source, however many
// a read would show (storetest.SourceRejectCounter).
func (s *Store) SourceRejectsStored(ctx context.Context, source string) (int64, error) {
	var n int64
	err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM source_rejects WHERE source = ?`, source).Scan(&n)
	return n, err
}
