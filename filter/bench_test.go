package filter

import (
	"encoding/json"
	"fmt"
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

// BenchmarkJMESPathExponential is the expression of issue 10 on its
// 200-byte event: n = 3 is accepted and cheap, n = 22 (3.9 s per event
// before) is refused by Compile.
func BenchmarkJMESPathExponential(b *testing.B) {
	for _, n := range []int{1, 3} {
		m, err := Compile(&herald.Filter{JMESPath: jmesExponential(n)})
		require.NoError(b, err)
		b.Run(fmt.Sprintf("Match/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.Match(NewInput(smallEvent()))
			}
		})
	}
	for _, n := range []int{4, 22} {
		b.Run(fmt.Sprintf("CompileRefused/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(&herald.Filter{JMESPath: jmesExponential(n)}); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}

// listEvent is an event whose data.l holds n elements of a kind.
func listEvent(kind string, n int) *herald.Event {
	var sb strings.Builder
	sb.WriteString(`{"l": [`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		switch kind {
		case "num":
			fmt.Fprintf(&sb, "%d.123456789012345", i)
		case "obj":
			fmt.Fprintf(&sb, `{"a": %d, "b": "x%d", "c": [1, 2]}`, n-i, i)
		}
	}
	sb.WriteString(`]}`)
	return &herald.Event{Type: "t", Data: json.RawMessage(sb.String())}
}

// BenchmarkJMESPathCostLimit is the worst an accepted JMESPath filter can
// cost: expressions whose work is close to its bound, each on the largest
// event its bound lets it run on (JMESPathCostLimit).
func BenchmarkJMESPathCostLimit(b *testing.B) {
	for _, c := range []struct{ name, expr, kind string }{
		{"ToString", "to_string(data) == 'x'", "num"},
		{"NestedMultiSelects", "data.l[*].[@,@][].[@,@][].[@,@][] | length(@) == `1`", "num"},
		{"WideMultiSelect", "data.l[*].[@,@,@,@,@,@,@,@,@,@][] | length(@) == `1`", "obj"},
		{"MaxByToString", "max_by(data.l, &to_string(@)).a == `1`", "obj"},
		{"SortBy", "sort_by(data.l, &b)[0].a == `1`", "obj"},
		{"MapMultiSelect", "map(&[@,@,@,@,@], data.l)[][] | length(@) == `1`", "obj"},
	} {
		m, err := Compile(&herald.Filter{JMESPath: c.expr})
		require.NoError(b, err)
		cost := m.(*jmesMatcher).cost
		fits := func(n int) bool {
			in := NewInput(listEvent(c.kind, n))
			_, size := in.jmesDoc()
			return cost.at(size, in.jmesPathSize, JMESPathCostLimit) <= JMESPathCostLimit
		}
		lo, hi := 1, 1<<21 // the largest n that fits
		for lo < hi {
			if mid := (lo + hi + 1) / 2; fits(mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		in := NewInput(listEvent(c.kind, lo))
		in.jmesDoc()
		b.Run(fmt.Sprintf("%s/n=%d", c.name, lo), func(b *testing.B) {
			for b.Loop() {
				m.Match(in)
			}
		})
	}
}

// BenchmarkESQueryCostLimit is the worst an es_query filter can cost:
// queries that run into ESQueryCostLimit.
func BenchmarkESQueryCostLimit(b *testing.B) {
	var clauses []string
	for i := range 1000 {
		clauses = append(clauses, fmt.Sprintf(`{"term": {"data.l": "absent-%d"}}`, i))
	}
	ev := listEvent("num", 5000)
	ev.Data = json.RawMessage(strings.Replace(string(ev.Data), `{"l"`, `{"s": "`+strings.Repeat("a", 100_000)+`", "l"`, 1))
	in := NewInput(ev)
	for name, q := range map[string]string{
		"ManyClauses": `{"bool": {"must_not": [` + strings.Join(clauses, ",") + `]}}`,
		"Wildcard":    `{"wildcard": {"data.s": "*` + strings.Repeat("a", 1000) + `b"}}`,
	} {
		m, err := Compile(&herald.Filter{ESQuery: json.RawMessage(q)})
		require.NoError(b, err)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if m.Match(in) {
					b.Fatal("matched")
				}
			}
		})
	}
}
