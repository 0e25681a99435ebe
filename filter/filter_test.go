package filter

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func TestCompileEmptyMatchesEverything(t *testing.T) {
	t.Parallel()

	for _, f := range []*herald.Filter{nil, {}, {ESQuery: json.RawMessage{}}} {
		m, err := Compile(f)
		require.NoError(t, err)
		require.True(t, m.Match(testInput(t)))
		require.True(t, m.Match(nil))
	}
}

func TestCompileMoreThanOneKind(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		filter herald.Filter
		msg    string
	}{
		{"cel and jmespath", herald.Filter{CEL: "true", JMESPath: "a"}, "got cel, jmespath"},
		{"jmespath and es", herald.Filter{JMESPath: "a", ESQuery: json.RawMessage(`{}`)}, "got jmespath, es_query"},
		{"all three", herald.Filter{CEL: "true", JMESPath: "a", ESQuery: json.RawMessage(`{}`)}, "got cel, jmespath, es_query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(&tt.filter)
			require.Nil(t, m)
			requireFilterError(t, err, "filter", tt.msg)
		})
	}
}

func TestCompileDispatchesByKind(t *testing.T) {
	t.Parallel()

	in := testInput(t)
	for _, f := range []herald.Filter{
		{CEL: `type == "bundle.indexed"`},
		{JMESPath: `type == 'bundle.indexed'`},
		{ESQuery: json.RawMessage(`{"term": {"type": "bundle.indexed"}}`)},
	} {
		m, err := Compile(&f)
		require.NoError(t, err)
		require.True(t, m.Match(in), "%+v", f)
	}
}

func TestNewInput(t *testing.T) {
	t.Parallel()

	t.Run("Envelope", func(t *testing.T) {
		t.Parallel()
		in := testInput(t)
		require.Equal(t, "evt_1", in.envelope["id"])
		require.Equal(t, "bundle.indexed", in.envelope["type"])
		require.Equal(t, "2024-05-01T12:00:00Z", in.envelope["timestamp"])
		require.Equal(t, "bundle-1", in.envelope["key"])
		require.Equal(t, int64(7), in.envelope["version"])
		data := in.envelope["data"].(map[string]any)
		require.Equal(t, int64(15), data["size"])
		require.Equal(t, 0.5, data["ratio"])
		// Beyond float64's exact range: kept as int64.
		require.Equal(t, int64(9007199254740993), data["files"].([]any)[1].(map[string]any)["size"])
	})

	t.Run("SameKeysAsEventEnvelope", func(t *testing.T) {
		t.Parallel()
		ev := testEvent(t)
		want := ev.Envelope()
		got := NewInput(ev).envelope
		require.Len(t, got, len(want))
		for k := range want {
			require.Contains(t, got, k)
		}
	})

	t.Run("NoKeyNoVersion", func(t *testing.T) {
		t.Parallel()
		in := NewInput(&herald.Event{ID: "e", Type: "t", Data: json.RawMessage(`{"x":1}`)})
		require.NotContains(t, in.envelope, "key")
		require.NotContains(t, in.envelope, "version")
		require.False(t, in.hasVersion)
	})

	t.Run("InvalidOrEmptyDataIsNull", func(t *testing.T) {
		t.Parallel()
		for _, raw := range []string{"", "{", "not json", `{"a":1} trailing`} {
			in := NewInput(&herald.Event{Type: "t", Data: json.RawMessage(raw)})
			require.Contains(t, in.envelope, "data")
			if raw != `{"a":1} trailing` {
				require.Nil(t, in.envelope["data"], raw)
			}
		}
	})

	t.Run("NilEvent", func(t *testing.T) {
		t.Parallel()
		in := NewInput(nil)
		require.Empty(t, in.envelope["type"])
	})

	t.Run("JMESPathViewIsFloat", func(t *testing.T) {
		t.Parallel()
		doc, _ := testInput(t).jmesDoc()
		require.Equal(t, float64(7), doc["version"])
		require.Equal(t, float64(15), doc["data"].(map[string]any)["size"])
	})
}

func TestParseNumber(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in   string
		want any
	}{
		{"0", int64(0)},
		{"-12", int64(-12)},
		{"9223372036854775807", int64(9223372036854775807)},
		{"9223372036854775808", float64(9223372036854775808)},
		{"1.0", 1.0},
		{"1e3", 1000.0},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, parseNumber(tt.in), tt.in)
	}
}

// TestMatchConcurrently runs every kind of matcher on one shared Input from
// many goroutines; go test -race checks the "safe for concurrent use" claim.
func TestMatchConcurrently(t *testing.T) {
	t.Parallel()

	in := testInput(t)
	var matchers []Matcher
	for _, f := range []herald.Filter{
		{CEL: `data.size > 10 && "blue" in data.tags`},
		{JMESPath: `data.files[?size > ` + "`100`" + `].name`},
		{ESQuery: json.RawMessage(`{"query": {"bool": {"must": [{"match": {"data.sample.donor.species": "homo"}}]}}}`)},
	} {
		m, err := Compile(&f)
		require.NoError(t, err)
		matchers = append(matchers, m)
	}
	done := make(chan bool)
	for range 8 {
		go func() {
			ok := true
			for range 50 {
				for _, m := range matchers {
					ok = ok && m.Match(in)
				}
			}
			done <- ok
		}()
	}
	for range 8 {
		require.True(t, <-done)
	}
}
