package eventtype

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

const orderSchema = `{"type":"object","required":["amount"],
	"properties":{"amount":{"type":"number"},"items":{"type":"array","items":{"$ref":"#/$defs/item"}}},
	"$defs":{"item":{"type":"object","properties":{"sku":{"type":"string"}}}}}`

// requireHeraldError checks err is a *herald.Error with code and field
// and returns its message.
func requireHeraldError(t *testing.T, err error, code herald.Code, field string) string {
	t.Helper()
	var he *herald.Error
	require.ErrorAs(t, err, &he)
	require.Equal(t, code, he.Code, he.Message)
	require.Equal(t, field, he.Field, he.Message)
	return he.Message
}

// TestEventTypeSchemaValidatePaths: a mismatch names the JSON path of the
// value at fault, in the request's terms.
func TestEventTypeSchemaValidatePaths(t *testing.T) {
	t.Parallel()
	sch, err := Compile(json.RawMessage(orderSchema))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(json.RawMessage(`{"amount":3,"items":[{"sku":"a"}]}`), "data"))

	e := requireHeraldError(t, sch.Validate(json.RawMessage(`{"amount":"3"}`), "data"), herald.CodeSchemaMismatch, "data.amount")
	require.Equal(t, "data.amount: got string, want number", e)
	e = requireHeraldError(t, sch.Validate(json.RawMessage(`{"amount":1,"items":[{"sku":"a"},{"sku":2}]}`), "events[4].data"),
		herald.CodeSchemaMismatch, "events[4].data.items[1].sku")
	require.Contains(t, e, "want string")
	e = requireHeraldError(t, sch.Validate(json.RawMessage(`{}`), "data"), herald.CodeSchemaMismatch, "data")
	require.Contains(t, e, "amount")
	requireHeraldError(t, sch.Validate(nil, "data"), herald.CodeSchemaMismatch, "data")

	odd, err := Compile(json.RawMessage(`{"properties":{"a.b":{"type":"integer"}}}`))
	require.NoError(t, err)
	requireHeraldError(t, odd.Validate(json.RawMessage(`{"a.b":1.5}`), "data"), herald.CodeSchemaMismatch, `data["a.b"]`)
}

// TestEventTypeSchemaNoRemoteRefs: a schema cannot make herald fetch
// anything, over the network or from its disk; the standard meta-schemas
// still resolve (they are embedded).
func TestEventTypeSchemaNoRemoteRefs(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"type":"string"}`), 0o600))

	for _, ref := range []string{srv.URL + "/s.json", "file://" + file, file, "s.json", "other#/x", "/etc/passwd"} {
		_, err := Compile(json.RawMessage(`{"properties":{"a":{"$ref":` + quoteJSON(ref) + `}}}`))
		e := requireHeraldError(t, err, herald.CodeInvalidSchema, "schema")
		require.Contains(t, e, "references outside the schema are not supported", ref)
	}
	_, err := Compile(json.RawMessage(`{"$id":"` + srv.URL + `/base.json","$ref":"s.json"}`))
	requireHeraldError(t, err, herald.CodeInvalidSchema, "schema")
	_, err = Compile(json.RawMessage(`{"$schema":"` + srv.URL + `/meta.json"}`))
	requireHeraldError(t, err, herald.CodeInvalidSchema, "schema")
	require.Zero(t, hits.Load(), "nothing was fetched")

	for _, meta := range []string{"https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-07/schema#"} {
		_, err := Compile(json.RawMessage(`{"$schema":"` + meta + `","type":"object"}`))
		require.NoError(t, err, meta)
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestEventTypeSchemaInvalid: a schema that is not a JSON Schema is
// invalid_schema with the reason.
func TestEventTypeSchemaInvalid(t *testing.T) {
	t.Parallel()
	for schema, holds := range map[string]string{
		`{"type":"nope"}`:            "/type",
		`{"minimum":"x"}`:            "/minimum",
		`{"pattern":"("}`:            "pattern",
		`{"$ref":"#/$defs/missing"}`: "missing",
		`[1]`:                        "",
		`not json`:                   "JSON",
	} {
		_, err := Compile(json.RawMessage(schema))
		e := requireHeraldError(t, err, herald.CodeInvalidSchema, "schema")
		require.Contains(t, e, holds, schema)
		require.NotContains(t, e, schemaURL, "the internal base URL stays internal")
	}
	for _, ok := range []string{`true`, `false`, `{}`, orderSchema} {
		_, err := Compile(json.RawMessage(ok))
		require.NoError(t, err, ok)
	}
}

// TestEventTypeCheckExample: the example must conform to the schema.
func TestEventTypeCheckExample(t *testing.T) {
	t.Parallel()
	et := &herald.EventType{Name: "order.placed", Schema: json.RawMessage(orderSchema), Example: json.RawMessage(`{"amount":"12"}`)}
	_, err := Check(et)
	e := requireHeraldError(t, err, herald.CodeSchemaMismatch, "example.amount")
	require.True(t, strings.HasPrefix(e, "the example does not conform to the schema: example.amount:"), e)
	et.Example = json.RawMessage(`{"amount":12}`)
	sch, err := Check(et)
	require.NoError(t, err)
	require.NotNil(t, sch)
	sch, err = Check(&herald.EventType{Name: "x", Example: json.RawMessage(`1`)})
	require.NoError(t, err)
	require.Nil(t, sch)
}

// FuzzEventTypeSchema: compiling any input, and validating any data
// against what compiled, returns an answer: no panic, no hang.
func FuzzEventTypeSchema(f *testing.F) {
	for _, seed := range []string{orderSchema, `true`, `{"type":"nope"}`, `{"$ref":"http://x/y"}`,
		`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, `{"pattern":"(a+)+$"}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","exclusiveMinimum":true,"minimum":1}`,
		`{"format":"email","contentEncoding":"base64","contentMediaType":"application/json"}`,
		`{"$dynamicRef":"#meta","$dynamicAnchor":"meta"}`, `{"unevaluatedProperties":false,"allOf":[{}]}`} {
		f.Add(seed, `{"amount":1,"a":"b"}`)
	}
	f.Fuzz(func(t *testing.T, schema, data string) {
		if len(schema) > herald.MaxEventTypeSchema {
			return
		}
		sch, err := Compile(json.RawMessage(schema))
		if err != nil {
			if he := (*herald.Error)(nil); !errors.As(err, &he) || he.Code != herald.CodeInvalidSchema {
				t.Fatalf("compile error %T %v is not invalid_schema", err, err)
			}
			return
		}
		if json.Valid([]byte(data)) {
			err := sch.Validate(json.RawMessage(data), "data")
			if he := (*herald.Error)(nil); err != nil && (!errors.As(err, &he) || he.Code != herald.CodeSchemaMismatch) {
				t.Fatalf("validate error %T %v is not schema_mismatch", err, err)
			}
		}
	})
}
