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

// SetResealHook sets a function SecretReseal runs between its read and its
// rewrites.
func (s *Store) SetResealHook(fn func(ctx context.Context)) { s.resealHook = fn }

// SetRawSecret overwrites one stored secret value, on its own connection.
func (s *Store) SetRawSecret(ctx context.Context, subscriptionID, value string) error {
	_, err := s.pool.Exec(ctx, `UPDATE subscription_secrets SET value = $2
		WHERE id = (SELECT min(id) FROM subscription_secrets WHERE subscription_id = $1)`, subscriptionID, value)
	return err
}
