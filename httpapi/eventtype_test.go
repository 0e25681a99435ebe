package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/store"
)

const orderPlacedSchema = `{"type":"object","required":["amount"],"properties":{"amount":{"type":"number"},"currency":{"type":"string"}}}`

// TestEventTypeCatalogCRUD: create, read, page, patch and delete event
// types; names, sizes, schemas and examples are checked on input.
func TestEventTypeCatalogCRUD(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		res := b.do(t, http.MethodPost, "/v1/event-types", obj{"name": "order.placed", "description": "An order was placed.",
			"schema": json.RawMessage(orderPlacedSchema), "example": obj{"amount": 12.5, "currency": "EUR"}, "validate": true})
		created := ok[eventTypeJSON](t, res, http.StatusCreated)
		require.Equal(t, "/v1/event-types/order.placed", res.header.Get("Location"))
		require.Equal(t, "order.placed", created.Name)
		require.JSONEq(t, orderPlacedSchema, string(created.Schema))
		require.JSONEq(t, `{"amount":12.5,"currency":"EUR"}`, string(created.Example))
		require.True(t, created.Validate)
		require.False(t, created.Deprecated)

		got := ok[eventTypeJSON](t, b.do(t, http.MethodGet, "/v1/event-types/order.placed", nil), http.StatusOK)
		require.Equal(t, created, got)
		requireError(t, b.do(t, http.MethodPost, "/v1/event-types", obj{"name": "order.placed"}), http.StatusConflict, herald.CodeConflict, "")
		requireError(t, b.do(t, http.MethodGet, "/v1/event-types/nope", nil), http.StatusNotFound, herald.CodeNotFound, "")

		// A bare type: schema and example null.
		bare := ok[eventTypeJSON](t, b.do(t, http.MethodPost, "/v1/event-types", obj{"name": "user.created"}), http.StatusCreated)
		require.Equal(t, "null", string(bare.Schema))
		require.Equal(t, "null", string(bare.Example))

		// Input checks.
		for _, tc := range []struct {
			body   obj
			status int
			code   herald.Code
			field  string
			holds  string
		}{
			{obj{}, 400, herald.CodeMissingField, "name", "required"},
			{obj{"name": "order.*"}, 400, herald.CodeInvalidField, "name", "not a pattern"},
			{obj{"name": "order.?"}, 400, herald.CodeInvalidField, "name", "not a pattern"},
			{obj{"name": "order placed"}, 400, herald.CodeInvalidField, "name", "whitespace"},
			{obj{"name": "herald.delivery.dead"}, 400, herald.CodeInvalidField, "name", "reserved"},
			{obj{"name": strings.Repeat("a", 257)}, 400, herald.CodeInvalidField, "name", "256"},
			{obj{"name": "a", "description": strings.Repeat("d", 1025)}, 400, herald.CodeInvalidField, "description", "1024"},
			{obj{"name": "a", "schema": strings.Repeat("x", 64<<10)}, 400, herald.CodeInvalidField, "schema", "65536"},
			{obj{"name": "a", "example": map[string]string{"x": strings.Repeat("x", 64<<10)}}, 400, herald.CodeInvalidField, "example", "65536"},
			{obj{"name": "a", "schema": 12}, 400, herald.CodeInvalidField, "schema", "object or a boolean"},
			{obj{"name": "a", "validate": true}, 400, herald.CodeInvalidField, "validate", "needs a schema"},
			{obj{"name": "a", "schema": obj{"type": "nope"}}, 422, herald.CodeInvalidSchema, "schema", "/type"},
			{obj{"name": "a", "schema": obj{"$ref": "https://example.com/s.json"}}, 422, herald.CodeInvalidSchema, "schema", "outside the schema"},
			{obj{"name": "a", "schema": obj{"$ref": "/etc/passwd"}}, 422, herald.CodeInvalidSchema, "schema", "outside the schema"},
			{obj{"name": "a", "schema": json.RawMessage(orderPlacedSchema), "example": obj{"amount": "12"}}, 422,
				herald.CodeSchemaMismatch, "example.amount", "want number"},
			{obj{"name": "a", "bogus": 1}, 400, herald.CodeUnknownField, "bogus", ""},
		} {
			e := requireError(t, b.do(t, http.MethodPost, "/v1/event-types", tc.body), tc.status, tc.code, tc.field)
			require.Contains(t, e.Message, tc.holds)
		}
		requireError(t, b.do(t, http.MethodGet, "/v1/event-types/a", nil), http.StatusNotFound, herald.CodeNotFound, "")

		// PATCH: replaces what it names, checks the whole.
		requireError(t, b.do(t, http.MethodPatch, "/v1/event-types/order.placed", obj{"name": "x"}), 400, herald.CodeInvalidField, "name")
		requireError(t, b.do(t, http.MethodPatch, "/v1/event-types/order.placed", obj{"schema": obj{"type": "object",
			"properties": obj{"amount": obj{"type": "string"}}}}), 422, herald.CodeSchemaMismatch, "example.amount")
		requireError(t, b.do(t, http.MethodPatch, "/v1/event-types/order.placed", obj{"schema": nil}), 400, herald.CodeInvalidField, "validate")
		requireError(t, b.do(t, http.MethodPatch, "/v1/event-types/nope", obj{"deprecated": true}), 404, herald.CodeNotFound, "")
		patched := ok[eventTypeJSON](t, b.do(t, http.MethodPatch, "/v1/event-types/order.placed",
			obj{"description": "Placed.", "validate": false, "example": nil}), http.StatusOK)
		require.Equal(t, "Placed.", patched.Description)
		require.False(t, patched.Validate)
		require.Equal(t, "null", string(patched.Example))
		require.JSONEq(t, orderPlacedSchema, string(patched.Schema), "unnamed fields stay")
		require.Equal(t, created.CreatedAt, patched.CreatedAt)

		// Paging by name; deprecated types only on request.
		for _, n := range []string{"a.one", "b.two", "c.three"} {
			ok[eventTypeJSON](t, b.do(t, http.MethodPost, "/v1/event-types", obj{"name": n, "deprecated": n == "b.two"}), http.StatusCreated)
		}
		var names []string
		cursor := ""
		for i := 0; ; i++ {
			require.Less(t, i, 10)
			path := "/v1/event-types?limit=2&include_deprecated=true"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			page := ok[listJSON[eventTypeJSON]](t, b.do(t, http.MethodGet, path, nil), http.StatusOK)
			for _, et := range page.Data {
				names = append(names, et.Name)
			}
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
		require.Equal(t, []string{"a.one", "b.two", "c.three", "order.placed", "user.created"}, names)
		all := ok[listJSON[eventTypeJSON]](t, b.do(t, http.MethodGet, "/v1/event-types", nil), http.StatusOK)
		require.Len(t, all.Data, 4, "b.two is deprecated")
		requireError(t, b.do(t, http.MethodGet, "/v1/event-types?include_deprecated=yes", nil), 400, herald.CodeInvalidField, "include_deprecated")
		requireError(t, b.do(t, http.MethodGet, "/v1/event-types?cursor=!!", nil), 400, herald.CodeInvalidCursor, "cursor")

		// Any token reads; only an unconfined admin writes.
		readOnly := b.createToken(t, obj{"name": "ro", "scopes": []string{"events:read"}}).Token
		tenant := b.createToken(t, obj{"name": "acme", "scopes": allScopesButAdmin, "tenant": "acme"}).Token
		for _, tok := range []string{readOnly, tenant} {
			ok[listJSON[eventTypeJSON]](t, b.do(t, http.MethodGet, "/v1/event-types", nil, withToken(tok)), http.StatusOK)
			ok[eventTypeJSON](t, b.do(t, http.MethodGet, "/v1/event-types/order.placed", nil, withToken(tok)), http.StatusOK)
			requireError(t, b.do(t, http.MethodPost, "/v1/event-types", obj{"name": "x"}, withToken(tok)), 403, herald.CodeForbidden, "")
			requireError(t, b.do(t, http.MethodPatch, "/v1/event-types/a.one", obj{"deprecated": true}, withToken(tok)), 403, herald.CodeForbidden, "")
			requireError(t, b.do(t, http.MethodDelete, "/v1/event-types/a.one", nil, withToken(tok)), 403, herald.CodeForbidden, "")
		}

		require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/event-types/a.one", nil).code)
		requireError(t, b.do(t, http.MethodDelete, "/v1/event-types/a.one", nil), 404, herald.CodeNotFound, "")
	})
}

// TestEventTypeValidatePublish: with validate on, an event whose data
// does not conform to its type's schema is refused (422 schema_mismatch
// naming the path), alone in a batch; with validate off, or for a type
// not in the catalog, events are accepted as before. A change through the
// API applies to the next publish.
func TestEventTypeValidatePublish(t *testing.T) {
	t.Parallel()
	testdb.ForEach(t, func(t *testing.T, s store.Store) {
		b := setup(t, s)
		bad := obj{"type": "order.placed", "data": obj{"amount": "12"}}
		good := obj{"type": "order.placed", "data": obj{"amount": 12}}
		b.publish(t, bad) // not in the catalog yet

		ok[eventTypeJSON](t, b.do(t, http.MethodPost, "/v1/event-types", obj{"name": "order.placed",
			"schema": json.RawMessage(orderPlacedSchema), "validate": true}), http.StatusCreated)
		e := requireError(t, b.do(t, http.MethodPost, "/v1/events", bad), http.StatusUnprocessableEntity, herald.CodeSchemaMismatch, "data.amount")
		require.Equal(t, "data.amount: got string, want number (the schema of event type order.placed)", e.Message)
		requireError(t, b.do(t, http.MethodPost, "/v1/events", obj{"type": "order.placed"}), http.StatusUnprocessableEntity,
			herald.CodeSchemaMismatch, "data")
		b.publish(t, good)
		b.publish(t, obj{"type": "other.type", "data": obj{"amount": "12"}})

		// Batch: the bad item alone is rejected, with its path.
		res := ok[batchJSON](t, b.do(t, http.MethodPost, "/v1/events/batch", obj{"events": []obj{
			{"id": "e0", "type": "order.placed", "data": obj{"amount": 1}},
			{"id": "e1", "type": "order.placed", "data": obj{"amount": true}},
			{"id": "e2", "type": "other.type"},
		}}), http.StatusOK)
		require.Len(t, res.Results, 3)
		require.Equal(t, batchAccepted, res.Results[0].Status)
		require.Equal(t, batchRejected, res.Results[1].Status)
		require.Equal(t, "e1", res.Results[1].ID)
		require.Equal(t, herald.CodeSchemaMismatch, res.Results[1].Error.Code)
		require.Equal(t, "events[1].data.amount", res.Results[1].Error.Field)
		require.Equal(t, batchAccepted, res.Results[2].Status)
		requireError(t, b.do(t, http.MethodGet, "/v1/events/e1", nil), http.StatusNotFound, herald.CodeNotFound, "")

		// Validation off: accepted again at once.
		ok[eventTypeJSON](t, b.do(t, http.MethodPatch, "/v1/event-types/order.placed", obj{"validate": false}), http.StatusOK)
		b.publish(t, bad)
		ok[eventTypeJSON](t, b.do(t, http.MethodPatch, "/v1/event-types/order.placed", obj{"validate": true}), http.StatusOK)
		requireError(t, b.do(t, http.MethodPost, "/v1/events", bad), http.StatusUnprocessableEntity, herald.CodeSchemaMismatch, "data.amount")
		require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/event-types/order.placed", nil).code)
		b.publish(t, bad)
	})
}
