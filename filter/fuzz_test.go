package filter

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald"
)

// Fuzz targets: compiling any input either succeeds or returns an
// invalid_filter *herald.Error naming its field, and matching the result
// against a fixed event returns, without panicking or hanging.
//
//	go test -run='^$' -fuzz=FuzzCompileESQuery -fuzztime=45s ./filter/

func fuzzCheck(t *testing.T, f *herald.Filter, field string) {
	// A hang would otherwise only show as the fuzzer's exec rate dropping
	// to zero; crash the worker so the input is recorded.
	watchdog := time.AfterFunc(fuzzDeadline, func() {
		panic(fmt.Sprintf("filter took longer than %s: %+v", fuzzDeadline, f))
	})
	defer watchdog.Stop()
	m, err := Compile(f)
	if err != nil {
		var herr *herald.Error
		if !errors.As(err, &herr) || herr.Code != herald.CodeInvalidFilter {
			t.Fatalf("error is not an invalid_filter *herald.Error: %#v", err)
		}
		if herr.Field != field && (len(herr.Field) < len(field) || herr.Field[:len(field)] != field) {
			t.Fatalf("error field %q outside %q", herr.Field, field)
		}
		if m != nil {
			t.Fatal("non-nil matcher with an error")
		}
		return
	}
	in := NewInput(fuzzEvent)
	m.Match(in)
	m.Match(NewInput(nil))
}

// fuzzDeadline is far above what a budgeted evaluation takes (tens of
// milliseconds) and below what the hostile seeds took before the budgets
// (the n = 22 JMESPath seed: 3.9 s).
const fuzzDeadline = 2 * time.Second

var fuzzEvent = func() *herald.Event {
	v := int64(3)
	return &herald.Event{ID: "evt_f", Type: "bundle.indexed", Key: "k", Version: &v, Data: json.RawMessage(testData)}
}()

func FuzzCompileCEL(f *testing.F) {
	for _, s := range []string{
		`type == "bundle.indexed"`,
		`data.size > 10 && "blue" in data.tags`,
		`data.files.exists(f, f.name.endsWith(".json"))`,
		`has(data.bundle.uuid) && version >= 2 && has_version`,
		`event.data.sample.organ.lowerAscii().contains("bra")`,
		`data.files.map(f, f.size).all(s, s > 0)`,
		`data.created.matches("^2024-[0-9]{2}")`,
		`data.active`,
		`type ==`,
		`1 / 0 == 1`,
		`[1,2,3].map(x, [1,2,3].map(y, x * y)).size() > 2`,
		`"a".repeat(10)`,
		`data.tags[9223372036854775807] == "x"`,
		`dyn(data.size) + 9223372036854775807 > 0`,
		// Hostile: strings that grow with every call stop at the cost limit.
		`type` + strings.Repeat(`.replace("", type)`, 40) + `.size() > 0`,
		`type.split("").join(type).split("").join(type).split("").join(type).split("").join(type).size() > 0`,
		`data.files.all(a, data.files.all(b, data.files.all(c, data.files.all(d, a != b || true))))`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		fuzzCheck(t, &herald.Filter{CEL: src}, "filter.cel")
	})
}

func FuzzCompileJMESPath(f *testing.F) {
	for _, s := range []string{
		"type == 'bundle.indexed'",
		"data.files[?size > `1000`].name",
		"contains(data.tags, 'blue')",
		"data.matrix[][] | max(@)",
		"data.files[::-1] | [0].name",
		"sort_by(data.files, &size)[-1].name",
		"data.\"a.b\"",
		"data.tags[",
		"`{",
		"abs(type)",
		"data.files[::0]",
		"to_number('1e400')",
		"join(', ', data.tags)",
		// Hostile: each is refused at compile time or bounded by the cost
		// limit (issue 10).
		"[data]" + strings.Repeat(".[@,@][]", 22),
		"[data]" + strings.Repeat(".[@,@][]", 30),
		"`[1]`" + strings.Repeat(".[@,@][]", 30),
		"[data]" + strings.Repeat(".[@,@][]", 3) + " | length(@) > `0`",
		"*.*.*.*.*.*.*.*.*.*",
		"map(&[@,@,@,@], map(&[@,@,@,@], map(&[@,@,@,@], map(&[@,@,@,@], data.tags))))",
		"sort_by(data.files, &to_string(sort_by(data.files, &to_string(@))))",
		"to_string(to_string(to_string(to_string(data))))",
		"join(type, data.tags)",
		"length(join(', ', [to_string(@), to_string(@), to_string(@), to_string(@)]))",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		fuzzCheck(t, &herald.Filter{JMESPath: src}, "filter.jmespath")
	})
}

func FuzzCompileESQuery(f *testing.F) {
	for _, s := range []string{
		`{"query": {"match_all": {}}}`,
		`{"term": {"type": "bundle.indexed"}}`,
		`{"term": {"data.size": {"value": 15, "boost": 1}}}`,
		`{"terms": {"data.tags": ["red", "blue", 1, true]}}`,
		`{"match": {"data.sample.donor.species": {"query": "homo sapiens", "operator": "and"}}}`,
		`{"range": {"data.files.size": {"gte": 10, "lt": "2e3"}}}`,
		`{"range": {"data.created": {"gte": "2024-01-01"}}}`,
		`{"exists": {"field": "data.files.name"}}`,
		`{"prefix": {"data.files.name": {"value": "READ", "case_insensitive": true}}}`,
		`{"wildcard": {"data.files.name": "*.fa?tq.*"}}`,
		`{"query": {"bool": {"must": [{"term": {"a": 1}}], "should": {"term": {"b": 2}}, "must_not": [], "filter": {"match_all": {}}, "minimum_should_match": "-50%"}}}`,
		`{"constant_score": {"filter": {"term": {"data.a.b": "dotted"}}}}`,
		`{"query": {"bool": {"must": [{"match_all": {}}, {"regexp": {"a": "b"}}]}}}`,
		`{"term": {"a..b": 1}}`,
		`{"range": {"a": {"gt": "now-1d"}}}`,
		`{"term": {"data.size": 1e400}}`,
		// Hostile: long backtracking wildcard, many clauses.
		`{"wildcard": {"data.project.title": "*` + strings.Repeat("?", 500) + `x"}}`,
		`{"bool": {"must_not": [` + strings.Repeat(`{"exists": {"field": "data.project"}},`, 500) + `{"match_all": {}}]}}`,
		`{"match": {"data.project.title": {"query": "` + strings.Repeat("a ", 255) + `cortex", "operator": "and"}}}`,
		`[]`,
		`null`,
		`{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fuzzCheck(t, &herald.Filter{ESQuery: raw}, "filter.es_query")
	})
}

// FuzzJMESPathCostBound checks the cost analysis against go-jmespath: for
// any expression that compiles and runs on the fuzz event, the size of the
// result is within the bound the analysis computed for it. A rule of
// jmescost.go that undercounts an output shows up here.
func FuzzJMESPathCostBound(f *testing.F) {
	for _, s := range []string{
		"[data]" + strings.Repeat(".[@,@][]", 3),
		"data.files[*].{n: name, s: size, t: type(@)}[?s > `1`]",
		"*.*.*",
		"to_string(data)",
		"reverse(to_string(data.files))",
		"join('--', data.tags)",
		"map(&[@, to_string(@)], data.tags)",
		"sort_by(data.files, &name)",
		"merge(data.bundle, data.sample, {a: data.tags})",
		"values(data)[][]",
		"keys(data.sample)",
		"not_null(data.missing, data.files)",
		"data.matrix[*][*].[@, `[1, \"x\"]`]",
		"data.project.contributors[::-1].[name, email][]",
		"to_array(data) | [0].files[-1:]",
		"max_by(data.files, &size) || min_by(data.files, &name)",
		"type(data) && length(data) && type(@)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		m, err := Compile(&herald.Filter{JMESPath: src})
		if err != nil {
			return
		}
		jm, ok := m.(*jmesMatcher)
		if !ok {
			return // the empty filter
		}
		in := NewInput(fuzzEvent)
		doc, size := in.jmesDoc()
		if jm.cost.at(size, in.jmesPathSize, JMESPathCostLimit) > JMESPathCostLimit {
			return
		}
		if jm.cost.sortsInPlace {
			doc, _ = toFloatTree(in.envelope).(map[string]any)
		}
		out, ok := jmesSearch(jm, doc)
		if !ok {
			return
		}
		bound := jm.cost.eval(jm.cost.out, size, in.jmesPathSize, math.Inf(1))
		if got := jmesValueSize(out); got > bound {
			t.Fatalf("%q: result of size %.0f over its bound %.0f", src, got, bound)
		}
	})
}

// jmesSearch evaluates without the matcher's truthiness; ok is false on an
// evaluation error or panic.
func jmesSearch(m *jmesMatcher, doc map[string]any) (out any, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	out, err := m.expr.Search(doc)
	return out, err == nil
}

// FuzzFoldKey: match queries look tokens up by foldKey; two strings must
// get the same key exactly when strings.EqualFold finds them equal.
func FuzzFoldKey(f *testing.F) {
	for _, s := range [][2]string{{"Needle", "nEEDLE"}, {"k", "\u212a"}, {"ß", "ss"}, {"\xff", "\ufffd"}, {"Σ", "ς"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.EqualFold(a, b) != (foldKey(a) == foldKey(b)) {
			t.Fatalf("EqualFold(%q, %q) = %v, foldKey %q %q", a, b, strings.EqualFold(a, b), foldKey(a), foldKey(b))
		}
	})
}
