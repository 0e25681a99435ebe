package herald

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzEventBody: the hand-written webhook body is byte for byte what
// json.Marshal of the envelope gives, for any valid data and any strings.
func FuzzEventBody(f *testing.F) {
	f.Add("evt_1", "order.created", "", "", int64(0), false, `{"a":1}`)
	f.Add("evt_2", "a.b", "k<1>", "acme", int64(-3), true, `{"s":"x & y"}`)
	f.Add("x\"y", "t\\u", "caf\xe9", "t\n", int64(9), true, "[1, 2]")
	f.Add("i", "t", "", "", int64(0), false, "\"\u2028\"")
	f.Add("i", "t", "", "", int64(0), false, `null`)
	f.Add("i", "t", "", "", int64(0), false, ``)
	f.Add("i", "t", "", "", int64(0), false, `{"a":"\u003c"}`)
	f.Fuzz(func(t *testing.T, id, typ, key, tenant string, version int64, hasVersion bool, data string) {
		if data != "" && !json.Valid([]byte(data)) {
			return
		}
		e := &Event{ID: id, Type: typ, Key: key, Tenant: tenant, Data: json.RawMessage(data),
			CreatedAt: time.Date(2026, 11, 25, 23, 0, 0, 123_000_000, time.UTC)}
		if hasVersion {
			e.Version = &version
		}
		d := e.Data
		if len(d) == 0 {
			d = json.RawMessage("null")
		}
		want := e.marshalBody(d, FormatTime(e.CreatedAt))
		require.Equal(t, string(want), string(e.Body()))
	})
}
