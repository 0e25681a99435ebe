package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store/postgres"
)

// TestSessionSettings: every connection of both pools starts with the
// settings Open asks for (jit off, backend_flush_after, per-pool plan
// modes), a setting named in the URL wins over herald's default, and one
// the server refuses is a clear error.
func TestSessionSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testdb.PostgresSchema(t)
	open := func(url string) *postgres.Store {
		s, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema, MaxConns: 2})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	s := open(testdb.URL())
	for name, want := range map[string][2]string{
		"backend_flush_after": {postgres.BackendFlushAfter, postgres.BackendFlushAfter},
		"jit":                 {"off", "off"},
		"plan_cache_mode":     {"force_custom_plan", "force_generic_plan"},
	} {
		mainPool, hotPool, err := s.SessionSetting(ctx, name)
		require.NoError(t, err)
		require.Equal(t, want, [2]string{mainPool, hotPool}, name)
	}

	sep := "?"
	if strings.Contains(testdb.URL(), "?") {
		sep = "&"
	}
	own := open(testdb.URL() + sep + "backend_flush_after=0&jit=on")
	for name, want := range map[string]string{"backend_flush_after": "0", "jit": "on"} {
		mainPool, hotPool, err := own.SessionSetting(ctx, name)
		require.NoError(t, err)
		require.Equal(t, [2]string{want, want}, [2]string{mainPool, hotPool}, "the URL's %s wins", name)
	}

	// A value the server refuses fails Open with the server's words.
	_, err := postgres.Open(ctx, postgres.Config{URL: testdb.URL() + sep + "backend_flush_after=abc", Schema: schema})
	require.ErrorContains(t, err, `invalid value for parameter "backend_flush_after"`)
}
