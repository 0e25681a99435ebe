package postgres

import "context"

// MigrateTo exposes migrateTo to the external tests.
func (s *Store) MigrateTo(ctx context.Context, upTo int) error { return s.migrateTo(ctx, upTo) }
