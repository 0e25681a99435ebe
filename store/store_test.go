package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPageLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want int }{
		{-5, DefaultPageLimit}, {0, DefaultPageLimit}, {1, 1}, {250, 250},
		{MaxPageLimit, MaxPageLimit}, {MaxPageLimit + 1, MaxPageLimit},
	} {
		require.Equal(t, tt.want, PageLimit(tt.in), "PageLimit(%d)", tt.in)
	}
}
