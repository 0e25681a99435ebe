package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAdaptProcsByStore(t *testing.T) {
	t.Parallel()
	pg := "postgres://postgres@127.0.0.1:5432/test"
	for _, tt := range []struct {
		mode, url string
		want      bool
	}{
		{"auto", pg, true},
		{"auto", "", false}, // SQLite: the commit's cgo call would hold the only P
		{"on", "", true},
		{"on", pg, true},
		{"off", pg, false},
	} {
		require.Equal(t, tt.want, adaptProcs(&config{AdaptProcs: tt.mode, DatabaseURL: tt.url}), "%s with %q", tt.mode, tt.url)
	}
}
