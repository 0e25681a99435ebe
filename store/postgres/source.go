package postgres

import (
	"context"
	"errors"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// TEMPORARY: replaced by the sources store work (migration 017).
var errSourcesTODO = errors.New("postgres: sources not implemented yet")

func (s *Store) SourceCreate(ctx context.Context, params *store.SourceCreateParams) (*herald.Source, error) {
	return nil, errSourcesTODO
}
func (s *Store) SourceGet(ctx context.Context, name string) (*herald.Source, error) {
	return nil, errSourcesTODO
}
func (s *Store) SourceList(ctx context.Context, params *store.SourceListParams) (*store.SourceListResult, error) {
	return nil, errSourcesTODO
}
func (s *Store) SourceUpdate(ctx context.Context, params *store.SourceUpdateParams) (*herald.Source, error) {
	return nil, errSourcesTODO
}
func (s *Store) SourceDelete(ctx context.Context, name string) error { return errSourcesTODO }
func (s *Store) SourcesVersion(ctx context.Context) (int64, error)   { return 0, errSourcesTODO }
func (s *Store) SourceReport(ctx context.Context, params *store.SourceReportParams) error {
	return errSourcesTODO
}
func (s *Store) SourceStatusGet(ctx context.Context, params *store.SourceStatusGetParams) (*herald.SourceStatus, error) {
	return nil, errSourcesTODO
}
func (s *Store) SourceLeaseAcquire(ctx context.Context, params *store.SourceLeaseParams) (bool, error) {
	return false, errSourcesTODO
}
func (s *Store) SourceLeaseRelease(ctx context.Context, params *store.SourceLeaseParams) error {
	return errSourcesTODO
}
