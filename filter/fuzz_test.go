package filter

import (
	"encoding/json"
	"errors"
	"fmt"
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

const fuzzDeadline = 5 * time.Second

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
