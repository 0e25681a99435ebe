package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/internal/testlog"
)

// TestWarnKeyFileMode: a group- or world-readable --encryption-key-file is
// warned about at WARN when herald serve checks its secrets; an owner-only one is not (issue 20).
func TestWarnKeyFileMode(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte("# keys\n"), 0o600))
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o644, true}, {0o640, true}, {0o604, true}, {0o600, false}, {0o400, false}} {
		require.NoError(t, os.Chmod(path, tc.mode))
		var buf testlog.Buffer
		c := &config{EncryptionKeyFile: path}
		require.NoError(t, checkSecrets(t.Context(), c, s, slog.New(slog.NewTextHandler(&buf, nil))))
		const msg = `level=WARN msg="--encryption-key-file is accessible to other users`
		if tc.warn {
			require.Contains(t, buf.String(), msg, "mode %#o", tc.mode)
		} else {
			require.NotContains(t, buf.String(), "--encryption-key-file is accessible", "mode %#o", tc.mode)
		}
	}
}
