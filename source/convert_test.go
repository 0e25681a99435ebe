package source

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/httpapi"
)

func conv(t *testing.T, src *herald.Source) *Converter {
	t.Helper()
	if src.Type == "" {
		src.Type = herald.DestinationAMQP
	}
	c, err := NewConverter(src, httpapi.DecodeEvent, 1024)
	require.NoError(t, err)
	return c
}

func TestConvertDefaults(t *testing.T) {
	t.Parallel()
	c := conv(t, &herald.Source{})
	body := []byte(`{"n": 12345678901234567890, "s": "é"}`)
	ev, rj := c.Convert(&Message{Body: body, Route: "order.created", MessageID: "m-1"})
	require.Nil(t, rj)
	require.Equal(t, "m-1", ev.ID)
	require.Equal(t, "order.created", ev.Type)
	require.JSONEq(t, string(body), string(ev.Data))
	require.Contains(t, string(ev.Data), "12345678901234567890", "data keeps the body's numbers exactly")

	ev, rj = c.Convert(&Message{Body: body, Route: "x"})
	require.Nil(t, rj)
	require.Equal(t, HashID(body), ev.ID, "no broker id: the body's hash")
}

func TestConvertMapping(t *testing.T) {
	t.Parallel()
	c := conv(t, &herald.Source{Mapping: &herald.SourceMapping{ID: "body.content_id", Type: "'doc.updated'",
		Key: "body.content_id", Version: "body.payload_version", Data: "{title: body.title, rk: routing_key, h: headers.h}"}})
	ev, rj := c.Convert(&Message{Body: []byte(`{"content_id":"c-7","payload_version":42,"title":"T"}`),
		Route: "rk.1", Headers: map[string]string{"h": "v"}})
	require.Nil(t, rj)
	require.Equal(t, "c-7", ev.ID)
	require.Equal(t, "doc.updated", ev.Type)
	require.Equal(t, "c-7", ev.Key)
	require.EqualValues(t, 42, *ev.Version)
	require.JSONEq(t, `{"title":"T","rk":"rk.1","h":"v"}`, string(ev.Data))
}

func TestConvertRejects(t *testing.T) {
	t.Parallel()
	c := conv(t, &herald.Source{Tenant: "acme", Mapping: &herald.SourceMapping{Type: "body.kind",
		Version: "body.v", Tenant: "body.tenant", Key: "body.key"}})
	cases := map[string]struct {
		body   string
		reason string
	}{
		"not json":      {"nope", herald.RejectNotJSON},
		"bad utf8":      {"{\"a\":\"\xff\"}", herald.RejectNotJSON},
		"too large":     {`{"kind":"a","p":"` + strings.Repeat("x", 1100) + `"}`, herald.RejectTooLarge},
		"no type":       {`{"other":1}`, herald.RejectMapping},
		"type object":   {`{"kind":{"a":1}}`, herald.RejectMapping},
		"version float": {`{"kind":"a","v":1.5}`, herald.RejectMapping},
		"reserved type": {`{"kind":"herald.x"}`, herald.RejectInvalid},
		"NUL in type":   {`{"kind":"a\u0000b"}`, herald.RejectInvalid},
		"key too long":  {`{"kind":"a","key":"` + strings.Repeat("k", 300) + `"}`, herald.RejectInvalid},
		"other tenant":  {`{"kind":"a","tenant":"globex"}`, herald.RejectTenant},
	}
	for name, tc := range cases {
		_, rj := c.Convert(&Message{Body: []byte(tc.body), Route: "r"})
		require.NotNil(t, rj, name)
		require.Equal(t, tc.reason, rj.Reason, "%s: %s", name, rj.Message)
		require.NotEmpty(t, rj.Message)
	}
	ev, rj := c.Convert(&Message{Body: []byte(`{"kind":"a","tenant":"acme","v":"7"}`)})
	require.Nil(t, rj)
	require.Equal(t, "acme", ev.Tenant)
	require.EqualValues(t, 7, *ev.Version)
}

func TestMappingCompileErrorsNameTheField(t *testing.T) {
	t.Parallel()
	_, err := NewConverter(&herald.Source{Type: herald.DestinationAMQP, Mapping: &herald.SourceMapping{Key: "body.["}},
		httpapi.DecodeEvent, 0)
	require.Error(t, err)
	var he *herald.Error
	require.ErrorAs(t, err, &he)
	require.Equal(t, "mapping.key", he.Field)
}

// The event object handed to the API's decoder has the bytes the map
// json.Marshal encoded before eventJSON: keys sorted, empty key and
// tenant left out, HTML characters escaped, an unmapped body compacted.
func TestConvertEventBytes(t *testing.T) {
	t.Parallel()
	var got []string
	record := func(body []byte) (*herald.Event, error) {
		got = append(got, string(body))
		return httpapi.DecodeEvent(body)
	}
	mapped := &herald.Source{Type: herald.DestinationAMQP, Tenant: "acme", Mapping: &herald.SourceMapping{
		Type: "body.kind", Key: "body.k", Version: "body.v", Data: "body.d"}}
	c, err := NewConverter(mapped, record, 0)
	require.NoError(t, err)
	_, rj := c.Convert(&Message{Body: []byte(`{"kind":"a","k":"k1","v":3,"d":{"z":"<&>","a":1.50}}`), MessageID: "m"})
	require.Nil(t, rj)
	_, rj = c.Convert(&Message{Body: []byte(`{"kind":"a","d":null}`), MessageID: "m"})
	require.Nil(t, rj)

	plain, err := NewConverter(&herald.Source{Type: herald.DestinationAMQP}, record, 0)
	require.NoError(t, err)
	_, rj = plain.Convert(&Message{Body: []byte("{ \"b\" : [1, 2],\n \"a\": \"<\" }"), Route: "r.k", MessageID: "m"})
	require.Nil(t, rj)
	require.Equal(t, []string{
		`{"data":{"a":1.5,"z":"\u003c\u0026\u003e"},"id":"m","key":"k1","tenant":"acme","type":"a","version":3}`,
		`{"data":null,"id":"m","tenant":"acme","type":"a"}`,
		`{"data":{"b":[1,2],"a":"\u003c"},"id":"m","type":"r.k"}`,
	}, got)
}

// A mapping that reads no body leaves it undecoded, and still rejects a
// body that is not JSON with the same words.
func TestConvertBodyNotRead(t *testing.T) {
	t.Parallel()
	c := conv(t, &herald.Source{Mapping: &herald.SourceMapping{Type: "headers.kind", Key: "routing_key"}})
	require.False(t, c.readsBody)
	ev, rj := c.Convert(&Message{Body: []byte(`{"x": [1, {"y": 2}]}`), Route: "rk", Headers: map[string]string{"kind": "a.b"}})
	require.Nil(t, rj)
	require.Equal(t, "a.b", ev.Type)
	require.Equal(t, "rk", ev.Key)
	require.JSONEq(t, `{"x":[1,{"y":2}]}`, string(ev.Data))

	reads := conv(t, &herald.Source{Mapping: &herald.SourceMapping{Type: "body.kind"}})
	for _, body := range []string{"nope", "", `{"a":`, `{"a":1}x`} {
		_, rj1 := c.Convert(&Message{Body: []byte(body), Headers: map[string]string{"kind": "a"}})
		_, rj2 := reads.Convert(&Message{Body: []byte(body)})
		require.NotNil(t, rj1, body)
		require.Equal(t, herald.RejectNotJSON, rj1.Reason)
		require.Equal(t, rj2, rj1, body)
	}
}

// BenchmarkConvert: one bench-shaped message (herald bench --source:
// type and data mapped from a 1 KiB body), and the same unmapped.
func BenchmarkConvert(b *testing.B) {
	body := []byte(`{"type":"bench.load","data":{"bench_t":1795000000000000000,"pad":"` + strings.Repeat("x", 1000) + `"}}`)
	for name, mapping := range map[string]*herald.SourceMapping{
		"mapped":   {Type: "body.type", Data: "body.data"},
		"unmapped": nil,
	} {
		b.Run(name, func(b *testing.B) {
			c, err := NewConverter(&herald.Source{Type: herald.DestinationNATS, Mapping: mapping}, httpapi.DecodeEvent, 0)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, rj := c.Convert(&Message{Body: body, Route: "bench.load"}); rj != nil {
					b.Fatal(rj)
				}
			}
		})
	}
}
