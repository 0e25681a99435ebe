package postgres

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestClaimSQLGolden keeps the claim's statements, assembled from constants
// in claim.go, throttle.go and ordering.go, rendered in
// testdata/claim_*.sql: a change to any part shows in review as a change to
// the statement that runs. Regenerate with
// go test ./store/postgres -run TestClaimSQLGolden -update.
func TestClaimSQLGolden(t *testing.T) {
	t.Parallel()
	for name, sql := range map[string]string{
		// One DeliveryClaim's statements, in the order they run.
		"claim_locks":          strings.Join(throttleLockSQLs, ";\n\n"),
		"claim_unordered_due":  unorderedDueSQL,
		"claim_discover":       discoverSQL,
		"claim":                claimSQL,
		"claim_plain":          claimPlainSQL,
		"claim_throttle_start": throttleRestartSQL,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("testdata", name+".sql")
			got := "-- " + name + ": rendered by TestClaimSQLGolden (-update rewrites it); do not edit.\n" +
				strings.TrimSpace(sql) + ";\n"
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to create it")
			require.Equal(t, string(want), got, "%s differs from the statement; run with -update and review the diff", path)
		})
	}
}
