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

// BenchmarkEventBody builds the webhook body of a 1 KiB event, by hand and
// with json.Marshal (what it replaced).
func BenchmarkEventBody(b *testing.B) {
	data := json.RawMessage(`{"bench_t":1234567890123456789,"pad":"` + string(make([]byte, 0)) + repeatX(1000) + `"}`)
	e := &Event{ID: "evt_01jbench0000000000000000", Type: "bench.event", Data: data, CreatedAt: time.Now()}
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			_ = e.Body()
		}
	})
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			_ = e.marshalBody(e.Data, FormatTime(e.CreatedAt))
		}
	})
}

func repeatX(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}
