package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Ingest-class transactions commit under the configured synchronous mode;
// queue bookkeeping always under NORMAL (see queueTx). SQLite reports FULL
// as 2 and NORMAL as 1.
func TestSynchronousModePerTransaction(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		configured string
		durable    int
	}{{"full", 2}, {"normal", 1}} {
		t.Run(tt.configured, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "h.db"), Synchronous: tt.configured})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			mode := func(run func(context.Context, string, func(queryer) error) error) int {
				var m int
				require.NoError(t, run(ctx, "probe", func(tx queryer) error {
					return tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&m)
				}))
				return m
			}
			require.Equal(t, tt.durable, mode(s.writeTx))
			require.Equal(t, 1, mode(s.queueTx))
			require.Equal(t, tt.durable, mode(s.writeTx), "switches back for the next durable commit")
		})
	}
}
