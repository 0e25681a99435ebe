package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/store"
)

func TestOutcomeChunks(t *testing.T) {
	t.Parallel()
	ids := func(chunks [][]store.DeliveryOutcome) [][]string {
		out := [][]string{}
		for _, c := range chunks {
			var row []string
			for _, o := range c {
				row = append(row, o.DeliveryID)
			}
			out = append(out, row)
		}
		return out
	}
	outcomes := func(ids ...string) []store.DeliveryOutcome {
		out := make([]store.DeliveryOutcome, len(ids))
		for i, id := range ids {
			out[i].DeliveryID = id
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []string
		max  int
		want [][]string
	}{
		{"empty", nil, 0, [][]string{}},
		{"distinct", []string{"a", "b", "c"}, 0, [][]string{{"a", "b", "c"}}},
		{"repeat starts a chunk", []string{"a", "b", "a", "c"}, 0, [][]string{{"a", "b"}, {"a", "c"}}},
		{"repeat twice", []string{"a", "a", "a"}, 0, [][]string{{"a"}, {"a"}, {"a"}}},
		{"cap", []string{"a", "b", "c", "d", "e"}, 2, [][]string{{"a", "b"}, {"c", "d"}, {"e"}}},
		{"cap and repeat", []string{"a", "b", "b", "c"}, 3, [][]string{{"a", "b"}, {"b", "c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, ids(store.OutcomeChunks(outcomes(tc.in...), tc.max)))
		})
	}
}
