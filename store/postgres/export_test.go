package postgres

import "context"

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
