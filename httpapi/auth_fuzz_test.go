package httpapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

// FuzzAuthHeader: whatever the Authorization header holds, parsing never
// panics, never yields a token with whitespace or control characters, and
// authentication accepts exactly the known tokens. Seeds found by
// `go test -fuzz FuzzAuthHeader ./httpapi` are kept in testdata/fuzz.
func FuzzAuthHeader(f *testing.F) {
	for _, seed := range []string{
		"Bearer " + testToken, "bearer " + testToken, "Bearer  " + testToken + " ", "Bearer", "Bearer ",
		"Basic dGVzdA==", "Bearer a b", "Bearer \x00", "Bearer " + testToken + "\x7f", "Bearer hrld_" + strings.Repeat("A", 43),
		"Bearer stored-token", "Bearer " + strings.Repeat("x", 600), "", " Bearer x", "Bearer\ttest-token",
	} {
		f.Add(seed)
	}
	s := testdb.SQLite(f)
	if err := s.APITokenCreate(f.Context(), &store.APITokenCreateParams{Hash: HashToken("stored-token"), Scopes: []string{"events:read"}}); err != nil {
		f.Fatal(err)
	}
	auth := NewTokenAuth(s, testToken)
	f.Fuzz(func(t *testing.T, header string) {
		token := parseBearer(header)
		for i := 0; i < len(token); i++ {
			require.False(t, token[i] <= ' ' || token[i] == 0x7f, "token %q has whitespace or a control character", token)
		}
		p, err := auth.Authenticate(t.Context(), token)
		require.NoError(t, err)
		switch token {
		case testToken:
			require.NotNil(t, p)
			require.True(t, p.Has(ScopeAdmin))
		case "stored-token":
			require.NotNil(t, p)
			require.False(t, p.Has(ScopeAdmin))
			require.True(t, p.Has(ScopeEventsRead))
		default:
			require.Nil(t, p, "token %q from header %q was accepted", token, header)
		}
	})
}
