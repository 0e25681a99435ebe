package filter

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func compileES(t *testing.T, q string) Matcher {
	t.Helper()
	m, err := Compile(&herald.Filter{ESQuery: json.RawMessage(q)})
	require.NoError(t, err, q)
	return m
}

func TestESQueryMatch(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		query string
		want  bool
	}{
		// Wrapping.
		{"QueryWrapper", `{"query": {"match_all": {}}}`, true},
		{"BareQuery", `{"match_all": {}}`, true},
		{"MatchAllBoost", `{"match_all": {"boost": 1.2}}`, true},
		{"MatchNone", `{"match_none": {}}`, false},

		// term: both forms, every type, coercion, case.
		{"TermString", `{"term": {"type": "bundle.indexed"}}`, true},
		{"TermStringMiss", `{"term": {"type": "bundle"}}`, false},
		{"TermStringCase", `{"term": {"data.sample.organ": "brain"}}`, false},
		{"TermCaseInsensitive", `{"term": {"data.sample.organ": {"value": "brain", "case_insensitive": true}}}`, true},
		{"TermValueForm", `{"term": {"key": {"value": "bundle-1", "boost": 2}}}`, true},
		{"TermInt", `{"term": {"data.size": 15}}`, true},
		{"TermIntAsFloat", `{"term": {"data.size": 15.0}}`, true},
		{"TermFloat", `{"term": {"data.ratio": 0.5}}`, true},
		{"TermFloatMiss", `{"term": {"data.ratio": 0.25}}`, false},
		{"TermBigInt", `{"term": {"data.files.size": 9007199254740993}}`, true},
		{"TermBigIntNeighbour", `{"term": {"data.files.size": 9007199254740992}}`, false},
		{"TermNumericStringQuery", `{"term": {"data.size": "15"}}`, true},
		{"TermNumericStringDoc", `{"term": {"data.count_str": 15}}`, true},
		{"TermStringVsNumericString", `{"term": {"data.count_str": "15.0"}}`, false},
		{"TermBool", `{"term": {"data.active": true}}`, true},
		{"TermBoolString", `{"term": {"data.active": "true"}}`, true},
		{"TermBoolMiss", `{"term": {"data.active": false}}`, false},
		{"TermVersion", `{"term": {"version": 7}}`, true},
		{"TermTimestamp", `{"term": {"timestamp": "2024-05-01T12:00:00Z"}}`, true},
		{"TermMissingField", `{"term": {"data.missing": "x"}}`, false},
		{"TermNull", `{"term": {"data.nothing": "null"}}`, false},
		{"TermOnObject", `{"term": {"data.bundle": "x"}}`, false},
		{"TermKeywordSuffix", `{"term": {"data.sample.organ.keyword": "Brain"}}`, true},
		{"TermKeywordSuffixNotNumbers", `{"term": {"data.size.keyword": 15}}`, false},

		// Arrays are walked at every step and at the end.
		{"ArrayLeaf", `{"term": {"data.tags": "green"}}`, true},
		{"ArrayOfObjects", `{"term": {"data.files.name": "reads_R1.fastq.gz"}}`, true},
		{"ArrayOfObjectsMiss", `{"term": {"data.files.name": "other"}}`, false},
		{"NestedArrays", `{"term": {"data.matrix": 4}}`, true},
		{"DottedKey", `{"term": {"data.a.b": "dotted"}}`, true},

		// terms.
		{"Terms", `{"terms": {"data.tags": ["red", "green"]}}`, true},
		{"TermsMiss", `{"terms": {"data.tags": ["red", "black"]}}`, false},
		{"TermsEmpty", `{"terms": {"data.tags": []}}`, false},
		{"TermsNumbers", `{"terms": {"data.size": [1, 15.0]}}`, true},
		{"TermsNumericStrings", `{"terms": {"data.size": ["15"]}}`, true},
		{"TermsNumberVsStringDoc", `{"terms": {"data.count_str": [15]}}`, true},
		{"TermsStringVsNumericString", `{"terms": {"data.count_str": ["15.0"]}}`, false},
		{"TermsBool", `{"terms": {"data.active": [true], "boost": 1}}`, true},
		{"TermsBoolString", `{"terms": {"data.active": ["true"]}}`, true},
		{"TermsBoolMiss", `{"terms": {"data.files.indexed": ["x"]}}`, false},

		// match.
		{"MatchToken", `{"match": {"data.sample.donor.species": "sapiens"}}`, true},
		{"MatchCaseInsensitive", `{"match": {"data.sample.donor.species": "HOMO"}}`, true},
		{"MatchAnyToken", `{"match": {"data.sample.donor.species": "mus sapiens"}}`, true},
		{"MatchNoToken", `{"match": {"data.sample.donor.species": "mus musculus"}}`, false},
		{"MatchPartialTokenIsNoMatch", `{"match": {"data.sample.donor.species": "sap"}}`, false},
		{"MatchOperatorAnd", `{"match": {"data.sample.donor.species": {"query": "sapiens homo", "operator": "and"}}}`, true},
		{"MatchOperatorAndMiss", `{"match": {"data.sample.donor.species": {"query": "homo mus", "operator": "AND"}}}`, false},
		{"MatchOperatorOr", `{"match": {"data.sample.donor.species": {"query": "homo mus", "operator": "or"}}}`, true},
		{"MatchEmptyQuery", `{"match": {"data.sample.donor.species": "  "}}`, false},
		{"MatchNumber", `{"match": {"data.size": 15}}`, true},
		{"MatchNumberString", `{"match": {"data.size": "15"}}`, true},
		{"MatchBool", `{"match": {"data.active": true}}`, true},
		{"MatchArray", `{"match": {"data.tags": "BLUE"}}`, true},
		{"MatchMissing", `{"match": {"data.missing": "x"}}`, false},

		// range.
		{"RangeGT", `{"range": {"data.size": {"gt": 14}}}`, true},
		{"RangeGTEdge", `{"range": {"data.size": {"gt": 15}}}`, false},
		{"RangeGTE", `{"range": {"data.size": {"gte": 15}}}`, true},
		{"RangeLT", `{"range": {"data.size": {"lt": 15.5}}}`, true},
		{"RangeLTEdge", `{"range": {"data.size": {"lt": 15}}}`, false},
		{"RangeLTE", `{"range": {"data.size": {"lte": 15}}}`, true},
		{"RangeBetween", `{"range": {"data.ratio": {"gt": 0, "lt": 1}}}`, true},
		{"RangeEmptyInterval", `{"range": {"data.ratio": {"gt": 1, "lt": 0}}}`, false},
		{"RangeNullBound", `{"range": {"data.ratio": {"gt": 0, "lt": null}}}`, true},
		{"RangeNumericString", `{"range": {"data.count_str": {"gte": 10}}}`, true},
		{"RangeStringBoundNumericDoc", `{"range": {"data.size": {"gte": "10"}}}`, true},
		{"RangeStringsLexicographic", `{"range": {"data.sample.organ": {"gte": "A", "lt": "C"}}}`, true},
		{"RangeDate", `{"range": {"data.created": {"gte": "2024-05-01T00:00:00Z", "lt": "2024-05-02"}}}`, true},
		{"RangeDateMiss", `{"range": {"timestamp": {"gt": "2024-05-01T12:00:00Z"}}}`, false},
		{"RangeArrayAny", `{"range": {"data.files.size": {"gt": 1000000}}}`, true},
		{"RangeBigInt", `{"range": {"data.files.size": {"gt": 9007199254740992}}}`, true},
		{"RangeOnBool", `{"range": {"data.active": {"gt": 0}}}`, false},
		{"RangeOnNonNumericString", `{"range": {"data.sample.organ": {"gt": 0}}}`, false},
		{"RangeMissing", `{"range": {"data.missing": {"gt": 0}}}`, false},

		// exists.
		{"Exists", `{"exists": {"field": "data.size"}}`, true},
		{"ExistsEmptyString", `{"exists": {"field": "data.empty"}}`, true},
		{"ExistsNull", `{"exists": {"field": "data.nothing"}}`, false},
		{"ExistsEmptyList", `{"exists": {"field": "data.empty_list"}}`, false},
		{"ExistsListOfNulls", `{"exists": {"field": "data.nulls"}}`, false},
		{"ExistsEmptyObject", `{"exists": {"field": "data.empty_obj"}}`, false},
		{"ExistsObject", `{"exists": {"field": "data.sample"}}`, true},
		{"ExistsThroughArray", `{"exists": {"field": "data.files.indexed"}}`, true},
		{"ExistsMissing", `{"exists": {"field": "data.missing"}}`, false},
		{"ExistsKeyAbsent", `{"exists": {"field": "key"}}`, true},

		// prefix and wildcard.
		{"Prefix", `{"prefix": {"data.files.name": "reads_"}}`, true},
		{"PrefixMiss", `{"prefix": {"data.files.name": "Reads_"}}`, false},
		{"PrefixCaseInsensitive", `{"prefix": {"data.files.name": {"value": "Reads_", "case_insensitive": true}}}`, true},
		{"PrefixOnNumber", `{"prefix": {"data.size": "1"}}`, false},
		{"Wildcard", `{"wildcard": {"data.files.name": "*.fastq.gz"}}`, true},
		{"WildcardQuestion", `{"wildcard": {"data.files.name": "reads_R?.fastq.gz"}}`, true},
		{"WildcardMiss", `{"wildcard": {"data.files.name": "*.bam"}}`, false},
		{"WildcardValueForm", `{"wildcard": {"type": {"value": "BUNDLE.*", "case_insensitive": true}}}`, true},
		{"WildcardWildcardKey", `{"wildcard": {"type": {"wildcard": "bundle.*"}}}`, true},

		// bool.
		{"BoolEmpty", `{"bool": {}}`, true},
		{"BoolMust", `{"bool": {"must": [{"term": {"type": "bundle.indexed"}}, {"range": {"data.size": {"gt": 10}}}]}}`, true},
		{"BoolMustOneFails", `{"bool": {"must": [{"term": {"type": "bundle.indexed"}}, {"range": {"data.size": {"gt": 20}}}]}}`, false},
		{"BoolMustSingleObject", `{"bool": {"must": {"term": {"type": "bundle.indexed"}}}}`, true},
		{"BoolFilter", `{"bool": {"filter": [{"term": {"data.active": true}}]}}`, true},
		{"BoolFilterFails", `{"bool": {"filter": {"term": {"data.active": false}}}}`, false},
		{"BoolMustNot", `{"bool": {"must_not": [{"term": {"data.tags": "red"}}]}}`, true},
		{"BoolMustNotFails", `{"bool": {"must_not": {"term": {"data.tags": "blue"}}}}`, false},
		{"BoolMustNotMissingField", `{"bool": {"must_not": {"exists": {"field": "data.missing"}}}}`, true},
		{"BoolShouldOnlyNeedsOne", `{"bool": {"should": [{"term": {"type": "x"}}, {"term": {"type": "y"}}]}}`, false},
		{"BoolShouldOnlyOneHits", `{"bool": {"should": [{"term": {"type": "x"}}, {"term": {"type": "bundle.indexed"}}]}}`, true},
		{"BoolShouldWithMustOptional", `{"bool": {"must": {"match_all": {}}, "should": [{"term": {"type": "x"}}]}}`, true},
		{"BoolShouldWithFilterOptional", `{"bool": {"filter": {"match_all": {}}, "should": {"term": {"type": "x"}}}}`, true},
		{"BoolShouldWithMustNotNeedsOne", `{"bool": {"must_not": {"term": {"type": "z"}}, "should": [{"term": {"type": "x"}}]}}`, false},
		{"BoolMinimumShouldMatch2", `{"bool": {"should": [{"term": {"type": "bundle.indexed"}}, {"term": {"key": "bundle-1"}}, {"term": {"type": "x"}}], "minimum_should_match": 2}}`, true},
		{"BoolMinimumShouldMatch3", `{"bool": {"should": [{"term": {"type": "bundle.indexed"}}, {"term": {"key": "bundle-1"}}, {"term": {"type": "x"}}], "minimum_should_match": "3"}}`, false},
		{"BoolMinimumShouldMatchPercent", `{"bool": {"should": [{"term": {"type": "bundle.indexed"}}, {"term": {"type": "x"}}], "minimum_should_match": "50%"}}`, true},
		{"BoolMinimumShouldMatchZeroWithMust", `{"bool": {"must": {"match_all": {}}, "should": [{"term": {"type": "x"}}], "minimum_should_match": 1}}`, false},
		{"BoolMinimumShouldMatchTooMany", `{"bool": {"should": [{"match_all": {}}], "minimum_should_match": 2}}`, false},
		{"BoolMinimumShouldMatchWithoutShould", `{"bool": {"must": {"match_all": {}}, "minimum_should_match": 1}}`, false},
		{"BoolNested", `{"bool": {"must": [{"bool": {"should": [{"prefix": {"type": "bundle."}}, {"term": {"type": "x"}}]}}], "must_not": [{"bool": {"must": {"term": {"data.active": false}}}}]}}`, true},
		{"BoolAsESRendersIt", `{"bool": {"must": [{"term": {"type": {"value": "bundle.indexed", "boost": 1.0}}}], "adjust_pure_negative": true, "boost": 1.0}}`, true},
		{"ConstantScore", `{"constant_score": {"filter": {"term": {"type": "bundle.indexed"}}, "boost": 1}}`, true},

		// A DSS v1 style subscription query.
		{"DSSStyle", `{"query": {"bool": {"must": [
			{"match": {"data.sample.donor.species": "Homo sapiens"}},
			{"range": {"data.files.size": {"gte": 1024}}},
			{"wildcard": {"data.bundle.version": "2018-*"}}]}}}`, true},
	}
	in := testInput(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, compileES(t, tt.query).Match(in), tt.query)
		})
	}
}

func TestESQueryCompileErrors(t *testing.T) {
	t.Parallel()

	const base = "filter.es_query"
	tests := []struct {
		name  string
		query string
		field string
		msg   string
	}{
		{"InvalidJSON", `{"term":`, base, "invalid JSON"},
		{"TrailingData", `{"match_all": {}} {}`, base, "data after the query object"},
		{"NotObject", `[1]`, base, "must be a JSON object, not an array"},
		{"Null", `null`, base, "must be a JSON object, not null"},
		{"KeysBesideQuery", `{"query": {"match_all": {}}, "size": 10}`, base, `unsupported keys "size" beside "query"`},
		{"QueryNotObject", `{"query": "x"}`, base + ".query", "must be a JSON object, not a string"},
		{"EmptyQuery", `{"query": {}}`, base + ".query", "empty query object"},
		{"TwoTypes", `{"term": {"a": 1}, "match": {"a": 1}}`, base, `exactly one query type, got "match", "term"`},
		{"UnknownType", `{"query": {"bool": {"must": [{"match_all": {}}, {"regexp": {"a": "b"}}]}}}`, base + ".query.bool.must[1]", `unsupported query type "regexp"`},
		{"UnknownTypeSingle", `{"bool": {"should": {"query_string": {}}}}`, base + ".bool.should", `unsupported query type "query_string"`},
		{"BoolNotObject", `{"bool": []}`, base + ".bool", "must be an object, not an array"},
		{"BoolUnknownKey", `{"bool": {"must": [], "mustnt": []}}`, base + ".bool", `unsupported parameter "mustnt"`},
		{"BoolClauseNotObject", `{"bool": {"filter": [{"match_all": {}}, 3]}}`, base + ".bool.filter[1]", "must be a JSON object, not a number"},
		{"MinimumShouldMatchBad", `{"bool": {"should": [], "minimum_should_match": "x"}}`, base + ".bool.minimum_should_match", `"x" is not an integer`},
		{"MinimumShouldMatchFloat", `{"bool": {"minimum_should_match": 1.5}}`, base + ".bool.minimum_should_match", `"1.5" is not an integer`},
		{"MinimumShouldMatchPercent", `{"bool": {"minimum_should_match": "150%"}}`, base + ".bool.minimum_should_match", "percentage between"},
		{"MinimumShouldMatchType", `{"bool": {"minimum_should_match": true}}`, base + ".bool.minimum_should_match", "not a boolean"},
		{"BoolBoostType", `{"bool": {"boost": "x"}}`, base + ".bool.boost", "must be a number"},
		{"MatchAllParams", `{"match_all": {"x": 1}}`, base + ".match_all", `unsupported parameter "x"`},
		{"MatchAllNotObject", `{"match_all": 1}`, base + ".match_all", "must be an object"},
		{"ConstantScoreNoFilter", `{"constant_score": {}}`, base + ".constant_score", `needs a "filter"`},
		{"TermNoField", `{"term": {}}`, base + ".term", "names no field"},
		{"TermTwoFields", `{"term": {"a": 1, "b": 2}}`, base + ".term", `more than one field: "a", "b"`},
		{"TermObjectValue", `{"term": {"a": {"x": 1}}}`, base + ".term", `on "a": unsupported parameter "x"`},
		{"TermNoValue", `{"term": {"a": {"boost": 1}}}`, base + ".term", `needs exactly one of "value"`},
		{"TermArrayValue", `{"term": {"a": [1]}}`, base + ".term", "not an array"},
		{"TermNullValue", `{"term": {"a": null}}`, base + ".term", "not null"},
		{"TermCaseInsensitiveType", `{"term": {"a": {"value": "x", "case_insensitive": "yes"}}}`, base + ".term", "case_insensitive must be a boolean"},
		{"TermBoostType", `{"term": {"a": {"value": "x", "boost": "high"}}}`, base + ".term", "boost must be a number"},
		{"TermEmptyField", `{"term": {"": 1}}`, base + ".term", "empty field name"},
		{"TermEmptySegment", `{"term": {"data..x": 1}}`, base + ".term", "empty path segment"},
		{"TermsNotArray", `{"terms": {"a": {"index": "x"}}}`, base + ".terms", "terms lookup is not supported"},
		{"TermsBadValue", `{"terms": {"a": [1, {}]}}`, base + ".terms[1]", "not an object"},
		{"MatchBadOperator", `{"match": {"a": {"query": "x", "operator": "xor"}}}`, base + ".match", "operator must be"},
		{"MatchNoQuery", `{"match": {"a": {"operator": "and"}}}`, base + ".match", `needs exactly one of "query"`},
		{"MatchArray", `{"match": {"a": ["x"]}}`, base + ".match", "not an array"},
		{"RangeNotObject", `{"range": {"a": 5}}`, base + ".range", "expected an object of gt, gte, lt, lte"},
		{"RangeUnknownOp", `{"range": {"a": {"from": 1}}}`, base + ".range", `unsupported parameter "from"`},
		{"RangeNoBound", `{"range": {"a": {}}}`, base + ".range", "needs at least one of"},
		{"RangeBoolBound", `{"range": {"a": {"gt": true}}}`, base + ".range", "gt must be a number or a string, not a boolean"},
		{"RangeDateMath", `{"range": {"a": {"gt": "now-1d"}}}`, base + ".range", "date math is not supported"},
		{"RangeDateMathAnchor", `{"range": {"a": {"lt": "2020-01-01||+1M"}}}`, base + ".range", "date math is not supported"},
		{"RangeFormat", `{"range": {"a": {"gt": "2020", "format": "yyyy"}}}`, base + ".range", `unsupported parameter "format"`},
		{"ExistsNoField", `{"exists": {}}`, base + ".exists", `needs "field"`},
		{"ExistsFieldType", `{"exists": {"field": 1}}`, base + ".exists", `needs "field"`},
		{"ExistsExtra", `{"exists": {"field": "a", "x": 1}}`, base + ".exists", `unsupported parameter "x"`},
		{"PrefixNumber", `{"prefix": {"a": 1}}`, base + ".prefix", "must be a string, not a number"},
		{"WildcardBothKeys", `{"wildcard": {"a": {"value": "x", "wildcard": "y"}}}`, base + ".wildcard", `needs exactly one of "value", "wildcard"`},
		{"WildcardNumber", `{"wildcard": {"a": {"value": 5}}}`, base + ".wildcard", "must be a string"},
		{"TooLarge", `{"term": {"a": "` + strings.Repeat("x", MaxESQueryBytes) + `"}}`, base, "the limit is 65536"},
		{"FieldTooLong", `{"term": {"` + strings.Repeat("x", 600) + `": 1}}`, base + ".term", "longer than 512"},
		{"TooManySegments", `{"term": {"` + strings.Repeat("x.", 40) + `x": 1}}`, base + ".term", "more than 32 segments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(&herald.Filter{ESQuery: json.RawMessage(tt.query)})
			require.Nil(t, m)
			requireFilterError(t, err, tt.field, tt.msg)
		})
	}
}

func TestESQueryLimits(t *testing.T) {
	t.Parallel()

	t.Run("Depth", func(t *testing.T) {
		t.Parallel()
		nest := func(n int) string {
			return strings.Repeat(`{"bool": {"must": `, n-1) + `{"match_all": {}}` + strings.Repeat(`}}`, n-1)
		}
		compileES(t, nest(MaxESQueryDepth))
		_, err := Compile(&herald.Filter{ESQuery: json.RawMessage(nest(MaxESQueryDepth + 1))})
		requireFilterError(t, err, "filter.es_query"+strings.Repeat(".bool.must", MaxESQueryDepth), "deeper than 32")
	})

	t.Run("Clauses", func(t *testing.T) {
		t.Parallel()
		many := func(n int) string {
			return `{"bool": {"should": [` + strings.TrimSuffix(strings.Repeat(`{"match_all": {}},`, n), ",") + `]}}`
		}
		compileES(t, many(MaxESQueryClauses-1))
		_, err := Compile(&herald.Filter{ESQuery: json.RawMessage(many(MaxESQueryClauses))})
		requireFilterError(t, err, fmt.Sprintf("filter.es_query.bool.should[%d]", MaxESQueryClauses-1), "more than 1024 query clauses")
	})

	t.Run("Terms", func(t *testing.T) {
		t.Parallel()
		vals := strings.TrimSuffix(strings.Repeat(`1,`, MaxESQueryTerms/2+1), ",")
		q := `{"bool": {"must": [{"terms": {"a": [` + vals + `]}}, {"terms": {"b": [` + vals + `]}}]}}`
		_, err := Compile(&herald.Filter{ESQuery: json.RawMessage(q)})
		requireFilterError(t, err, "filter.es_query.bool.must[1].terms", "more than 4096 terms values")
	})
}

func TestWildcardMatch(t *testing.T) {
	t.Parallel()

	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"*", "anything", true},
		{"?", "", false},
		{"?", "a", true},
		{"?", "é", true},
		{"??", "é", false},
		{"a*c", "abbbc", true},
		{"a*c", "abbbd", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxcyyb", false},
		{"*.fastq.gz", "r1.fastq.gz", true},
		{"*.fastq.gz", "r1.fastq.gz.tmp", false},
		{"a**b", "ab", true},
		{"a?c*", "abcdef", true},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{`a\?`, "a?", true},
		{`a\`, `a\`, true},
		{"*a*a*a*a*a*a*b", strings.Repeat("a", 200), false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, wildcardMatch(parseWildcard(tt.pattern), tt.s, &esBudget{left: ESQueryCostLimit}), "%q ~ %q", tt.pattern, tt.s)
	}
}

// TestESQueryCostLimit: an evaluation that runs out of ESQueryCostLimit
// stops and does not match, even where a cut-short must_not would have
// made it match, and is counted.
func TestESQueryCostLimit(t *testing.T) {
	t.Parallel()

	var list strings.Builder
	list.WriteString(`{"l": [`)
	for i := range 5000 {
		if i > 0 {
			list.WriteByte(',')
		}
		fmt.Fprintf(&list, `"v%d"`, i)
	}
	list.WriteString(`], "s": "` + strings.Repeat("a", 100_000) + `"}`)
	in := NewInput(&herald.Event{Type: "t", Data: json.RawMessage(list.String())})

	// 1000 clauses, each walking 5000 values: 5,000,000 units.
	var clauses []string
	for i := range 1000 {
		clauses = append(clauses, fmt.Sprintf(`{"term": {"data.l": "absent-%d"}}`, i))
	}
	mustNot := `{"bool": {"must_not": [` + strings.Join(clauses, ",") + `]}}`
	// A wildcard that compares 1000 pattern characters at each of the
	// 100,000 positions of the string: 10^8 steps.
	wildcard := `{"wildcard": {"data.s": "*` + strings.Repeat("a", 1000) + `b"}}`

	for name, q := range map[string]string{"ManyClauses": mustNot, "Wildcard": wildcard} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(&herald.Filter{ESQuery: json.RawMessage(q)})
			require.NoError(t, err)
			before := CostLimitHits()["es_query"]
			require.False(t, m.Match(in))
			require.Greater(t, CostLimitHits()["es_query"], before)
		})
	}

	// Within the budget, the same shapes answer as before.
	m, err := Compile(&herald.Filter{ESQuery: json.RawMessage(`{"bool": {"must_not": [` + strings.Join(clauses[:10], ",") + `]}}`)})
	require.NoError(t, err)
	require.True(t, m.Match(in))
}

// TestESMatchLinear: a match query costs one pass over the value, whatever
// the number of query tokens (it was tokens × value length).
func TestESMatchLinear(t *testing.T) {
	t.Parallel()

	text := strings.Repeat("lorem ipsum dolor ", 20_000) + "Needle"
	in := NewInput(&herald.Event{Type: "t", Data: json.RawMessage(`{"text": "` + text + `"}`)})
	var tokens []string
	for i := range MaxMatchTokens - 1 {
		tokens = append(tokens, fmt.Sprintf("w%d", i))
	}
	for _, op := range []string{"or", "and"} {
		query := strings.Join(append(tokens, "nEEDLE"), " ")
		if op == "and" {
			query = "LOREM needle Ipsum"
		}
		m, err := Compile(&herald.Filter{ESQuery: json.RawMessage(`{"match": {"data.text": {"query": "` + query + `", "operator": "` + op + `"}}}`)})
		require.NoError(t, err)
		b := &esBudget{left: ESQueryCostLimit}
		require.True(t, m.(*esMatcher).root.match(in.envelope, b), op)
		require.LessOrEqual(t, ESQueryCostLimit-b.left, 2*len(text), "%s: work linear in the text", op)
	}
}

func TestFoldKey(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"Needle", "nEEDLE", true},
		{"k", "\u212a", true}, // Kelvin sign
		{"s", "ſ", true},      // long s
		{"straße", "STRASSE", false},
		{"Σίσυφος", "ΣΊΣΥΦΟΣ", true},
		{"abc", "abd", false},
		{"\xff", "\ufffd", true}, // both decode to U+FFFD
		{"", "", true},
	} {
		require.Equal(t, tt.want, foldKey(tt.a) == foldKey(tt.b), "%q %q", tt.a, tt.b)
		require.Equal(t, strings.EqualFold(tt.a, tt.b), foldKey(tt.a) == foldKey(tt.b), "%q %q", tt.a, tt.b)
	}
}

func TestMinimumShouldMatch(t *testing.T) {
	t.Parallel()

	tests := []struct {
		v      any
		should int
		want   int
	}{
		{json.Number("2"), 3, 2},
		{"2", 3, 2},
		{" 2 ", 3, 2},
		{json.Number("-1"), 3, 2},
		{"-5", 3, 0},
		{"75%", 4, 3},
		{"75%", 3, 2}, // rounded down
		{"-25%", 4, 3},
		{"-25%", 3, 3}, // 25% of 3 rounds down to 0
		{"100%", 3, 3},
		{"0%", 3, 0},
		{json.Number("5"), 3, 5}, // unsatisfiable; the bool query becomes match_none
	}
	for _, tt := range tests {
		got, err := minimumShouldMatch(tt.v, tt.should, "p")
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "%v of %d", tt.v, tt.should)
	}
}

func TestParseNumeric(t *testing.T) {
	t.Parallel()

	tests := []struct {
		s    string
		want num
		ok   bool
	}{
		{"15", num{i: 15, isInt: true}, true},
		{"-3", num{i: -3, isInt: true}, true},
		{"15.0", num{i: 15, isInt: true}, true},
		{"1e2", num{i: 100, isInt: true}, true},
		{"0.5", num{f: 0.5}, true},
		{"", num{}, false},
		{"NaN", num{}, false},
		{"Inf", num{}, false},
		{"1e999", num{}, false},
		{"0x10", num{}, false},
		{"1_000", num{}, false},
		{" 1", num{}, false},
		{"abc", num{}, false},
	}
	for _, tt := range tests {
		got, ok := parseNumeric(tt.s)
		require.Equal(t, tt.ok, ok, tt.s)
		require.Equal(t, tt.want, got, tt.s)
	}
}

func TestNumCompare(t *testing.T) {
	t.Parallel()

	tests := []struct {
		a, b any
		want int
	}{
		{int64(1), int64(2), -1},
		{int64(2), 2.0, 0},
		{2.5, int64(2), 1},
		{int64(9007199254740993), int64(9007199254740992), 1},
		{-1.5, -1.25, -1},
	}
	for _, tt := range tests {
		a, _ := toNum(tt.a)
		b, _ := toNum(tt.b)
		require.Equal(t, tt.want, a.cmp(b), "%v <=> %v", tt.a, tt.b)
	}
}

// TestESQueryErrorsStayShort: client-supplied keys are cut in messages.
func TestESQueryErrorsStayShort(t *testing.T) {
	t.Parallel()

	long := strings.Repeat("x", 5000)
	many := make([]string, 50)
	for i := range many {
		many[i] = fmt.Sprintf(`"k%d": 1`, i)
	}
	for _, q := range []string{
		`{"` + long + `": {}}`,
		`{"bool": {"` + long + `": 1}}`,
		`{"term": {"a": {"value": 1, "` + long + `": 1}}}`,
		`{"term": {"` + long + `": 1}}`,
		`{"term": {` + strings.Join(many, ",") + `}}`,
		`{"bool": {"minimum_should_match": "` + long + `"}}`,
	} {
		_, err := Compile(&herald.Filter{ESQuery: json.RawMessage(q)})
		require.Error(t, err)
		require.Less(t, len(err.Error()), 600, err.Error())
	}
}

func TestMatchNilInput(t *testing.T) {
	t.Parallel()

	for _, f := range []herald.Filter{
		{CEL: `type == ""`},
		{JMESPath: `type == ''`},
		{ESQuery: json.RawMessage(`{"term": {"type": ""}}`)},
	} {
		m, err := Compile(&f)
		require.NoError(t, err)
		require.True(t, m.Match(nil), "%+v", f)
	}
}
