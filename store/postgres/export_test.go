package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// MigrateTo exposes migrateTo to the external tests.
func (s *Store) MigrateTo(ctx context.Context, upTo int) error { return s.migrateTo(ctx, upTo) }

// AttemptPlantOrphan stores an attempt for a delivery id that names no
// delivery, as DeliveryCompleteMany did before it refused to
// (storetest.OrphanAttemptPlanter).
func (s *Store) AttemptPlantOrphan(ctx context.Context, deliveryID string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO attempts (delivery_id, n, at, duration_ms, status, error, error_message, tier)
		VALUES ($1, 1, now(), 5, 500, 'http_status', 'endpoint answered 500', 0)`, deliveryID)
	return err
}

// RawSecrets reads the value column as stored (storetest.SecretsBackend).
func (s *Store) RawSecrets(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT value FROM subscription_secrets ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
