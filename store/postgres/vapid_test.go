package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/seal"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
	"github.com/heraldhq/herald/store/storetest"
)

func TestVAPID(t *testing.T) {
	t.Parallel()
	storetest.RunVAPID(t, func(t *testing.T) *storetest.SecretsBackend {
		schema := testdb.PostgresSchema(t)
		var cur *postgres.Store
		t.Cleanup(func() {
			if cur != nil {
				cur.Close()
			}
		})
		return &storetest.SecretsBackend{Open: func(keys *seal.Ring) store.Store {
			if cur != nil {
				cur.Close()
			}
			s, err := postgres.Open(t.Context(), postgres.Config{URL: testdb.URL(), Schema: schema, MaxConns: 4, Keys: keys})
			require.NoError(t, err)
			require.NoError(t, s.Migrate(t.Context()))
			cur = s
			return s
		}}
	})
}
