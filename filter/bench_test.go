package filter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// BenchmarkMatch measures one Match per kind on the ~1 KiB test event, with
// the Input prepared once (as fan-out does) and with preparation included.
func BenchmarkMatch(b *testing.B) {
	require.InDelta(b, 1024, len(testData), 300, "the benchmark event should be about 1 KiB")
	filters := []struct {
		name   string
		filter herald.Filter
	}{
		{"CEL", herald.Filter{CEL: `type == "bundle.indexed" && data.sample.donor.species == "Homo sapiens" && data.files.exists(f, f.size > 1000000)`}},
		{"JMESPath", herald.Filter{JMESPath: "type == 'bundle.indexed' && data.sample.donor.species == 'Homo sapiens' && length(data.files[?size > `1000000`]) > `0`"}},
		{"ESQuery", herald.Filter{ESQuery: json.RawMessage(`{"query": {"bool": {"must": [
			{"term": {"type": "bundle.indexed"}},
			{"match": {"data.sample.donor.species": "Homo sapiens"}},
			{"range": {"data.files.size": {"gt": 1000000}}}]}}}`)}},
	}
	ev := testEvent(b)
	for _, f := range filters {
		m, err := Compile(&f.filter)
		require.NoError(b, err)
		in := NewInput(ev)
		require.True(b, m.Match(in))
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.Match(in)
			}
		})
		b.Run(f.name+"/WithNewInput", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.Match(NewInput(ev))
			}
		})
	}
}

func BenchmarkNewInput(b *testing.B) {
	ev := testEvent(b)
	b.ReportAllocs()
	for b.Loop() {
		NewInput(ev)
	}
}

func BenchmarkCompile(b *testing.B) {
	for _, f := range []struct {
		name   string
		filter herald.Filter
	}{
		{"CEL", herald.Filter{CEL: `type == "bundle.indexed" && data.size > 10`}},
		{"JMESPath", herald.Filter{JMESPath: "type == 'bundle.indexed' && data.size > `10`"}},
		{"ESQuery", herald.Filter{ESQuery: json.RawMessage(`{"bool": {"must": [{"term": {"type": "bundle.indexed"}}, {"range": {"data.size": {"gt": 10}}}]}}`)}},
	} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(&f.filter); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCELCostLimit is the worst case a CEL filter can add: an
// expression that runs into CELCostLimit.
func BenchmarkCELCostLimit(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"l": [`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"abcdefghij"`)
	}
	sb.WriteString(`]}`)
	in := NewInput(&herald.Event{Type: "t", Data: []byte(sb.String())})
	m, err := Compile(&herald.Filter{CEL: `data.l.all(a, data.l.all(b, a != b || true))`})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if m.Match(in) {
			b.Fatal("matched")
		}
	}
}
