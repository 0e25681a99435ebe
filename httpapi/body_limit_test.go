package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/testdb"
)

// bodyOfSize pads the JSON body prefix + padding + suffix to exactly n bytes.
func bodyOfSize(n int, prefix, suffix string) string {
	return prefix + strings.Repeat("x", n-len(prefix)-len(suffix)) + suffix
}

// MaxBodyBytes (--max-body-bytes) sets the batch API's limit too, to
// BatchBodyFactor times it, as the README says; an explicit
// MaxBatchBodyBytes still wins.
func TestMaxBodyBytesSetsBatchLimit(t *testing.T) {
	t.Parallel()
	s := testdb.SQLite(t)
	ing := ingest.New(ingest.Config{Store: s})
	ing.Start()
	t.Cleanup(ing.Close)
	newAPI := func(single, batch int64) *testBundle {
		return &testBundle{store: s, handler: New(Config{
			Store: s, Publisher: ing, Auth: NewTokenAuth(s, testToken),
			Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
			MaxBodyBytes: single, MaxBatchBodyBytes: batch,
		})}
	}
	const single = 1000
	b := newAPI(single, 0)

	event := func(n int) string { return bodyOfSize(n, `{"type": "a", "data": "`, `"}`) }
	batch := func(n int) string { return bodyOfSize(n, `{"events": [{"type": "a", "data": "`, `"}]}`) }

	ok[publishJSON](t, b.do(t, http.MethodPost, "/v1/events", event(single)), http.StatusAccepted)
	requireError(t, b.do(t, http.MethodPost, "/v1/events", event(single+1)), http.StatusRequestEntityTooLarge, herald.CodeBodyTooLarge, "")

	out := ok[batchJSON](t, b.do(t, http.MethodPost, "/v1/events/batch", batch(BatchBodyFactor*single)), http.StatusOK)
	require.Equal(t, batchAccepted, out.Results[0].Status)
	requireError(t, b.do(t, http.MethodPost, "/v1/events/batch", batch(BatchBodyFactor*single+1)),
		http.StatusRequestEntityTooLarge, herald.CodeBodyTooLarge, "")

	explicit := newAPI(single, 2*single)
	requireError(t, explicit.do(t, http.MethodPost, "/v1/events/batch", batch(2*single+1)),
		http.StatusRequestEntityTooLarge, herald.CodeBodyTooLarge, "")

	// The default is unchanged: 16 MiB.
	require.Equal(t, int64(16<<20), int64(DefaultMaxBatchBodyBytes))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/events/batch", strings.NewReader(batch(DefaultMaxBatchBodyBytes+1)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	newAPI(0, 0).handler.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
}
