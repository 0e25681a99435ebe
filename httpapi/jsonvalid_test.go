package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// validJSONCases are table cases and fuzz seeds; json.Valid is the answer.
var validJSONCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, `[ ]`, `{"a":1}`, `{"a":1,}`, `{,}`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`,
	`{"a" 1}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`, `"`, `"abc`, `"a\"b"`, `"\\"`, `"\/"`, `"\x"`,
	`"\u12"`, `"\u12G4"`, `"\u00e9"`, `"\uD800"`, "\"tab\there\"", "\"nl\nhere\"", "\"\x00\"", "\"\x1f\"",
	"\"\x7f\"", "\"caf\xe9\"", "\"\xff\xfe\"", "\xef\xbb\xbf{}", `true`, `false`, `null`, `tru`, `nul`,
	`truex`, `True`, `0`, `-0`, `01`, `-01`, `1.`, `.5`, `1.5`, `-1.5e10`, `1e`, `1e+`, `1E-7`, `1e5.5`,
	`-`, `--1`, `+1`, `1_000`, `0x10`, `1 2`, `{}{}`, `[]]`, `[[]`, `{"a":[1,{"b":null}],"c":"d"}`,
	"\t\r\n[\t1\r,\n2 ]\n", `{"a":1}x`, `[1,"2",true,false,null,{},[]]`, "[\"a\"\x00]",
}

func TestValidJSON(t *testing.T) {
	t.Parallel()
	for _, c := range validJSONCases {
		require.Equal(t, json.Valid([]byte(c)), validJSON([]byte(c)), "%q", c)
	}
}

func TestValidJSONDepth(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{maxJSONDepth - 1, maxJSONDepth, maxJSONDepth + 1} {
		for _, inner := range []string{"", "1"} {
			arr := []byte(strings.Repeat("[", depth) + inner + strings.Repeat("]", depth))
			require.Equal(t, json.Valid(arr), validJSON(arr), "array depth %d %q", depth, inner)
			obj := []byte(strings.Repeat(`{"k":`, depth-1) + "{}" + strings.Repeat("}", depth-1))
			require.Equal(t, json.Valid(obj), validJSON(obj), "object depth %d", depth)
		}
	}
}

// FuzzValidJSON: validJSON answers as json.Valid for any input.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validJSONCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		require.Equal(t, json.Valid(b), validJSON(b), "%q", b)
	})
}

func BenchmarkValidJSON(b *testing.B) {
	event := []byte(`{"type":"order.created","key":"order-42","data":{"order":42,"note":"` +
		strings.Repeat("x", 900) + `","items":[{"sku":"a-1","qty":2,"price":9.99},{"sku":"b-2","qty":1,"price":-1.5e3}],"paid":true,"coupon":null}}`)
	batch := append([]byte(`{"events":[`), bytes.Repeat(append(event, ','), 99)...)
	batch = append(append(batch, event...), "]}"...)
	for _, in := range []struct {
		name string
		body []byte
	}{{"event", event}, {"batch100", batch}} {
		b.Run(in.name+"/validJSON", func(b *testing.B) {
			b.SetBytes(int64(len(in.body)))
			for b.Loop() {
				if !validJSON(in.body) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(in.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(in.body)))
			for b.Loop() {
				if !json.Valid(in.body) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
