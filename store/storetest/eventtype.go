package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// The event type catalog (store/eventtype.go).

func newEventType(name string, mods ...func(*herald.EventType)) *herald.EventType {
	et := &herald.EventType{
		Name: name, Description: "An order was placed.\nSent once per order.",
		// Key order and spacing as given: the store keeps the text.
		Schema:    json.RawMessage(`{"type":"object","required":["amount"],"properties":{"amount":{"type":"number"}}}`),
		Example:   json.RawMessage(`{"amount":12.5,"currency":"EUR"}`),
		Validate:  true,
		CreatedAt: now, UpdatedAt: now,
	}
	for _, mod := range mods {
		mod(et)
	}
	return et
}

func testEventType(t *testing.T, newStore NewStoreFunc) {
	t.Run("CRUDAndVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		v0, err := b.store.EventTypesVersion(b.ctx)
		require.NoError(t, err)

		want := newEventType("order.placed")
		got, err := b.store.EventTypeCreate(b.ctx, &store.EventTypeCreateParams{EventType: want})
		require.NoError(t, err)
		require.Equal(t, want, got)
		v1, err := b.store.EventTypesVersion(b.ctx)
		require.NoError(t, err)
		require.Greater(t, v1, v0, "a create bumps the version")

		read, err := b.store.EventTypeGet(b.ctx, "order.placed")
		require.NoError(t, err)
		require.Equal(t, want, read)
		require.Equal(t, string(want.Schema), string(read.Schema), "schema reads back byte for byte")

		_, err = b.store.EventTypeCreate(b.ctx, &store.EventTypeCreateParams{EventType: newEventType("order.placed")})
		require.ErrorIs(t, err, herald.ErrConflict)

		// Update replaces every mutable field; nil schema and example are none.
		upd := *read
		upd.Description, upd.Schema, upd.Example, upd.Deprecated, upd.Validate = "", nil, nil, true, false
		upd.UpdatedAt = now.Add(time.Minute)
		got, err = b.store.EventTypeUpdate(b.ctx, &store.EventTypeUpdateParams{EventType: &upd})
		require.NoError(t, err)
		require.Equal(t, &upd, got)
		require.Equal(t, now, got.CreatedAt)
		v2, err := b.store.EventTypesVersion(b.ctx)
		require.NoError(t, err)
		require.Greater(t, v2, v1, "an update bumps the version")

		missing := newEventType("nope")
		_, err = b.store.EventTypeUpdate(b.ctx, &store.EventTypeUpdateParams{EventType: missing})
		require.ErrorIs(t, err, herald.ErrNotFound)

		require.NoError(t, b.store.EventTypeDelete(b.ctx, "order.placed"))
		_, err = b.store.EventTypeGet(b.ctx, "order.placed")
		require.ErrorIs(t, err, herald.ErrNotFound)
		require.ErrorIs(t, b.store.EventTypeDelete(b.ctx, "order.placed"), herald.ErrNotFound)
		v3, err := b.store.EventTypesVersion(b.ctx)
		require.NoError(t, err)
		require.Greater(t, v3, v2, "a delete bumps the version")

		// A failed write bumps nothing.
		_, err = b.store.EventTypeUpdate(b.ctx, &store.EventTypeUpdateParams{EventType: missing})
		require.True(t, errors.Is(err, herald.ErrNotFound))
		v4, err := b.store.EventTypesVersion(b.ctx)
		require.NoError(t, err)
		require.Equal(t, v3, v4)
	})

	t.Run("ListPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		res, err := b.store.EventTypeList(b.ctx, &store.EventTypeListParams{Limit: 2})
		require.NoError(t, err)
		require.Empty(t, res.EventTypes)
		require.False(t, res.More)

		// Byte order: "Z" < "a" < "a.b" < "a_b"; "b" deprecated.
		for _, name := range []string{"a_b", "a.b", "Z", "a", "b", "c"} {
			_, err := b.store.EventTypeCreate(b.ctx, &store.EventTypeCreateParams{EventType: newEventType(name,
				func(et *herald.EventType) { et.Deprecated = name == "b" })})
			require.NoError(t, err)
		}
		names := func(res *store.EventTypeListResult) []string {
			out := []string{}
			for _, et := range res.EventTypes {
				out = append(out, et.Name)
			}
			return out
		}
		var pages [][]string
		after := ""
		for i := 0; ; i++ {
			require.Less(t, i, 10)
			res, err := b.store.EventTypeList(b.ctx, &store.EventTypeListParams{After: after, Limit: 2, IncludeDeprecated: true})
			require.NoError(t, err)
			pages = append(pages, names(res))
			if !res.More {
				break
			}
			after = res.EventTypes[len(res.EventTypes)-1].Name
		}
		require.Equal(t, [][]string{{"Z", "a"}, {"a.b", "a_b"}, {"b", "c"}}, pages,
			"a last page that is exactly full says no more")

		res, err = b.store.EventTypeList(b.ctx, &store.EventTypeListParams{})
		require.NoError(t, err)
		require.Equal(t, []string{"Z", "a", "a.b", "a_b", "c"}, names(res), "limit 0 lists all; deprecated skipped")
		require.False(t, res.More)

		res, err = b.store.EventTypeList(b.ctx, &store.EventTypeListParams{After: "a_b", Limit: 1})
		require.NoError(t, err)
		require.Equal(t, []string{"c"}, names(res), "deprecated b is skipped within a page")
		require.False(t, res.More)

		res, err = b.store.EventTypeList(b.ctx, &store.EventTypeListParams{After: "c", Limit: 5, IncludeDeprecated: true})
		require.NoError(t, err)
		require.Empty(t, res.EventTypes)
		require.False(t, res.More)

		for i := range 3 {
			_, err := b.store.EventTypeCreate(b.ctx, &store.EventTypeCreateParams{EventType: newEventType(fmt.Sprintf("d%d", i))})
			require.NoError(t, err)
		}
		res, err = b.store.EventTypeList(b.ctx, &store.EventTypeListParams{After: "c", Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []string{"d0", "d1"}, names(res))
		require.True(t, res.More)
	})
}
