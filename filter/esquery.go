package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of an Elasticsearch query filter. They keep a stored filter small
// and its evaluation linear in the event size.
const (
	// MaxESQueryBytes bounds the JSON text of an es_query.
	MaxESQueryBytes = 64 << 10
	// MaxESQueryDepth bounds the nesting of query objects (bool in bool...).
	MaxESQueryDepth = 32
	// MaxESQueryClauses bounds the number of query objects in one filter.
	MaxESQueryClauses = 1024
	// MaxESQueryTerms bounds the values of all terms queries together.
	MaxESQueryTerms = 4096
	// maxFieldLength and maxFieldSegments bound a dotted field path.
	maxFieldLength   = 512
	maxFieldSegments = 32

	// ESQueryCostLimit bounds the work of one evaluation: one unit per
	// document value a clause visits, one per byte a test reads rune by
	// rune (match, case-insensitive term, prefix and wildcard), one per
	// step of a wildcard match, one per 16 bytes hashed or compared.
	// Without it a query of MaxESQueryClauses clauses, each reading a 1 MB
	// event, or one wildcard against a long string (pattern length times
	// string length), costs seconds. An evaluation that reaches it stops
	// and the event does not match (counted in CostLimitHits); at the limit
	// it has taken 10–30 ms of CPU (BenchmarkESQueryCostLimit).
	ESQueryCostLimit = 2_000_000
)

// esQueryTypes lists the supported query types, for error messages.
var esQueryTypes = []string{
	"bool", "constant_score", "exists", "match", "match_all", "match_none",
	"prefix", "range", "term", "terms", "wildcard",
}

// esMatcher matches the event envelope against a compiled query tree.
type esMatcher struct {
	root esNode
}

func (m *esMatcher) Match(in *Input) bool {
	if in == nil {
		in = emptyInput
	}
	b := &esBudget{left: ESQueryCostLimit}
	ok := m.root.match(in.envelope, b)
	if b.exhausted() {
		// Clauses cut short answered false, which a must_not turns into
		// true: the answer means nothing.
		costLimitHits.esQuery.Add(1)
		return false
	}
	return ok
}

// esBudget is the work left to one evaluation, in ESQueryCostLimit units.
// Once it is spent every clause answers false at once.
type esBudget struct{ left int }

// spend takes n units and reports whether the evaluation may go on.
func (b *esBudget) spend(n int) bool {
	b.left -= n
	return b.left >= 0
}

func (b *esBudget) exhausted() bool { return b.left < 0 }

// spendBytes charges a test that reads s byte by byte or rune by rune.
func (b *esBudget) spendBytes(s string) bool { return b.spend(1 + len(s)) }

// spendHash charges hashing or comparing s, which runs a word at a time.
func (b *esBudget) spendHash(s string) bool { return b.spend(1 + len(s)/16) }

// esNode is one compiled query; doc is the envelope.
type esNode interface {
	match(doc any, b *esBudget) bool
}

// compileESQuery parses the query DSL subset DSS v1 subscriptions used:
// {"query": {...}} or the bare query object.
func compileESQuery(raw json.RawMessage) (Matcher, error) {
	if len(raw) > MaxESQueryBytes {
		return nil, filterError(fieldESQuery, "query is %d bytes; the limit is %d", len(raw), MaxESQueryBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, filterError(fieldESQuery, "invalid JSON: %s", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, filterError(fieldESQuery, "invalid JSON: data after the query object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, filterError(fieldESQuery, "must be a JSON object, not %s", jsonType(v))
	}
	path := fieldESQuery
	if q, ok := obj["query"]; ok {
		if len(obj) > 1 {
			return nil, filterError(fieldESQuery, "unsupported keys %s beside \"query\"", quoteKeys(obj, "query"))
		}
		v, path = q, path+".query"
	}
	c := &esCompiler{}
	root, err := c.query(v, path, 1)
	if err != nil {
		return nil, err
	}
	return &esMatcher{root: root}, nil
}

type esCompiler struct {
	clauses int
	terms   int
}

// query compiles the query object v found at path.
func (c *esCompiler) query(v any, path string, depth int) (esNode, error) {
	if depth > MaxESQueryDepth {
		return nil, filterError(path, "queries nest deeper than %d levels", MaxESQueryDepth)
	}
	c.clauses++
	if c.clauses > MaxESQueryClauses {
		return nil, filterError(path, "more than %d query clauses", MaxESQueryClauses)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, filterError(path, "a query must be a JSON object, not %s", jsonType(v))
	}
	if len(obj) != 1 {
		if len(obj) == 0 {
			return nil, filterError(path, "empty query object; expected one of %s", strings.Join(esQueryTypes, ", "))
		}
		return nil, filterError(path, "a query object has exactly one query type, got %s", quoteKeys(obj, ""))
	}
	var typ string
	var body any
	for typ, body = range obj {
	}
	qpath := path + "." + typ
	switch typ {
	case "bool":
		return c.boolQuery(body, qpath, depth)
	case "constant_score":
		return c.constantScore(body, qpath, depth)
	case "match_all", "match_none":
		params, ok := body.(map[string]any)
		if !ok {
			return nil, filterError(qpath, "must be an object, not %s", jsonType(body))
		}
		if err := onlyKeys(params, qpath, "boost", "_name"); err != nil {
			return nil, err
		}
		return constNode(typ == "match_all"), nil
	case "term":
		return termQuery(body, qpath)
	case "terms":
		return c.termsQuery(body, qpath)
	case "match":
		return matchQuery(body, qpath)
	case "range":
		return rangeQuery(body, qpath)
	case "exists":
		return existsQuery(body, qpath)
	case "prefix":
		return prefixQuery(body, qpath)
	case "wildcard":
		return wildcardQuery(body, qpath)
	}
	return nil, filterError(path, "unsupported query type %q; supported: %s", short(typ), strings.Join(esQueryTypes, ", "))
}

// ---- compound queries ----

type constNode bool

func (n constNode) match(any, *esBudget) bool { return bool(n) }

type boolNode struct {
	must    []esNode // must and filter: scoring does not exist here
	mustNot []esNode
	should  []esNode
	// minShould is the number of should clauses that must match; 0 makes
	// should clauses optional.
	minShould int
}

func (n *boolNode) match(doc any, b *esBudget) bool {
	for _, q := range n.must {
		if !q.match(doc, b) {
			return false
		}
	}
	for _, q := range n.mustNot {
		if q.match(doc, b) || b.exhausted() {
			return false
		}
	}
	if n.minShould == 0 {
		return true
	}
	hits := 0
	for i, q := range n.should {
		if q.match(doc, b) {
			hits++
			if hits >= n.minShould {
				return true
			}
		}
		if hits+len(n.should)-i-1 < n.minShould {
			return false
		}
	}
	return false
}

func (c *esCompiler) boolQuery(body any, path string, depth int) (esNode, error) {
	params, ok := body.(map[string]any)
	if !ok {
		return nil, filterError(path, "must be an object, not %s", jsonType(body))
	}
	if err := onlyKeys(params, path, "must", "filter", "should", "must_not",
		"minimum_should_match", "boost", "_name", "adjust_pure_negative"); err != nil {
		return nil, err
	}
	n := &boolNode{}
	var err error
	for _, occ := range []struct {
		key string
		dst *[]esNode
	}{{"must", &n.must}, {"filter", &n.must}, {"must_not", &n.mustNot}, {"should", &n.should}} {
		v, ok := params[occ.key]
		if !ok {
			continue
		}
		cpath := path + "." + occ.key
		if arr, isArr := v.([]any); isArr {
			for i, e := range arr {
				q, err := c.query(e, fmt.Sprintf("%s[%d]", cpath, i), depth+1)
				if err != nil {
					return nil, err
				}
				*occ.dst = append(*occ.dst, q)
			}
			continue
		}
		q, err := c.query(v, cpath, depth+1)
		if err != nil {
			return nil, err
		}
		*occ.dst = append(*occ.dst, q)
	}
	// Elasticsearch: with should clauses and no must or filter clause, at
	// least one should clause must match; otherwise they are optional.
	if len(n.should) > 0 && len(n.must) == 0 {
		n.minShould = 1
	}
	if v, ok := params["minimum_should_match"]; ok {
		n.minShould, err = minimumShouldMatch(v, len(n.should), path+".minimum_should_match")
		if err != nil {
			return nil, err
		}
	}
	if v, ok := params["boost"]; ok {
		if _, isNum := v.(json.Number); !isNum {
			return nil, filterError(path+".boost", "must be a number, not %s", jsonType(v))
		}
	}
	if v, ok := params["adjust_pure_negative"]; ok {
		if _, isBool := v.(bool); !isBool {
			return nil, filterError(path+".adjust_pure_negative", "must be a boolean, not %s", jsonType(v))
		}
	}
	if n.minShould > len(n.should) {
		return constNode(false), nil // as in Elasticsearch: cannot be satisfied
	}
	return n, nil
}

// minimumShouldMatch resolves an Elasticsearch minimum_should_match value
// (3, -1, "3", "-1", "75%", "-25%") against the number of should clauses.
func minimumShouldMatch(v any, should int, path string) (int, error) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = strings.TrimSpace(x)
	default:
		return 0, filterError(path, "must be an integer or a percentage string, not %s", jsonType(v))
	}
	percent := strings.HasSuffix(s, "%")
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || n < -1_000_000 || n > 1_000_000 {
		return 0, filterError(path, "%q is not an integer or a percentage", short(s))
	}
	if percent {
		if n < -100 || n > 100 {
			return 0, filterError(path, "%q is not a percentage between -100%% and 100%%", s)
		}
		// Elasticsearch rounds the computed count down.
		if n < 0 {
			return should - should*-n/100, nil
		}
		return should * n / 100, nil
	}
	if n < 0 {
		return max(should+n, 0), nil
	}
	return n, nil
}

func (c *esCompiler) constantScore(body any, path string, depth int) (esNode, error) {
	params, ok := body.(map[string]any)
	if !ok {
		return nil, filterError(path, "must be an object, not %s", jsonType(body))
	}
	if err := onlyKeys(params, path, "filter", "boost", "_name"); err != nil {
		return nil, err
	}
	f, ok := params["filter"]
	if !ok {
		return nil, filterError(path, "needs a \"filter\" query")
	}
	return c.query(f, path+".filter", depth+1)
}

// ---- leaf queries ----

// fieldNode applies test to every value the path reaches in the document.
type fieldNode struct {
	path fieldPath
	test leafTest
	// keywordAlt is the path without a trailing ".keyword": Elasticsearch
	// dynamic mappings index each string also as field.keyword, and queries
	// written for them say so. Only string values are tested through it.
	keywordAlt *fieldPath
}

// leafTest tests one document value, charging b for what it reads.
type leafTest interface {
	test(v any, b *esBudget) bool
}

func (n *fieldNode) match(doc any, b *esBudget) bool {
	if n.path.walk(doc, 0, n.test, b) {
		return true
	}
	return n.keywordAlt != nil && n.keywordAlt.walk(doc, 0, stringsOnly{n.test}, b)
}

type stringsOnly struct{ leafTest }

func (s stringsOnly) test(v any, b *esBudget) bool {
	_, ok := v.(string)
	return ok && s.leafTest.test(v, b)
}

func newFieldNode(field, path string, test leafTest) (esNode, error) {
	fp, err := parseFieldPath(field, path)
	if err != nil {
		return nil, err
	}
	n := &fieldNode{path: fp, test: test}
	if base, ok := strings.CutSuffix(field, ".keyword"); ok && base != "" {
		alt, _ := parseFieldPath(base, path)
		n.keywordAlt = &alt
	}
	return n, nil
}

// fieldParams splits a field query body {"<field>": spec, "boost": …} into
// the field and its spec; boost and _name are accepted and ignored.
func fieldParams(body any, path string) (string, any, error) {
	obj, ok := body.(map[string]any)
	if !ok {
		return "", nil, filterError(path, "must be an object, not %s", jsonType(body))
	}
	field, spec, n := "", any(nil), 0
	for k, v := range obj {
		if (k == "boost" || k == "_name") && len(obj) > 1 {
			continue
		}
		field, spec, n = k, v, n+1
	}
	if n != 1 {
		if n == 0 {
			return "", nil, filterError(path, "names no field")
		}
		return "", nil, filterError(path, "names more than one field: %s", quoteKeys(obj, "boost", "_name"))
	}
	if len(field) > maxFieldLength {
		return "", nil, filterError(path, "field name longer than %d bytes", maxFieldLength)
	}
	return field, spec, nil
}

// specObject reads {"value": …, options…} forms. It returns the value under
// valueKey (or one of them) and the options object, or ok=false when spec
// is not an object.
func specObject(spec any, path, field string, valueKeys []string, options ...string) (value any, opts map[string]any, ok bool, err error) {
	obj, isObj := spec.(map[string]any)
	if !isObj {
		return spec, nil, false, nil
	}
	allowed := append(append([]string{"boost", "_name"}, valueKeys...), options...)
	for k := range obj {
		if !contains(allowed, k) {
			return nil, nil, true, filterError(path, "on %q: unsupported parameter %q", field, short(k))
		}
	}
	found := 0
	for _, k := range valueKeys {
		if v, has := obj[k]; has {
			value, found = v, found+1
		}
	}
	if found != 1 {
		return nil, nil, true, filterError(path, "on %q: needs exactly one of %s", field, quoteList(valueKeys))
	}
	if b, has := obj["boost"]; has {
		if _, isNum := b.(json.Number); !isNum {
			return nil, nil, true, filterError(path, "on %q: boost must be a number, not %s", field, jsonType(b))
		}
	}
	return value, obj, true, nil
}

func boolOption(opts map[string]any, name, path, field string) (bool, error) {
	v, ok := opts[name]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, filterError(path, "on %q: %s must be a boolean, not %s", field, name, jsonType(v))
	}
	return b, nil
}

// term

type termTest struct {
	val scalar
	ci  bool
}

func (t termTest) test(v any, b *esBudget) bool {
	if s, ok := v.(string); ok {
		if t.ci && !b.spendBytes(s) || !t.ci && !b.spendHash(s) {
			return false
		}
	}
	return t.val.equal(v, t.ci)
}

func termQuery(body any, path string) (esNode, error) {
	field, spec, err := fieldParams(body, path)
	if err != nil {
		return nil, err
	}
	raw, opts, _, err := specObject(spec, path, field, []string{"value"}, "case_insensitive")
	if err != nil {
		return nil, err
	}
	ci, err := boolOption(opts, "case_insensitive", path, field)
	if err != nil {
		return nil, err
	}
	val, ok := parseScalar(raw)
	if !ok {
		return nil, filterError(path, "on %q: value must be a string, number or boolean, not %s", field, jsonType(raw))
	}
	return newFieldNode(field, path, termTest{val: val, ci: ci})
}

// terms

type termsTest struct {
	strs    map[string]struct{} // string values, and "true"/"false" for booleans
	nums    map[num]struct{}    // number values
	strNums map[num]struct{}    // string values that read as numbers
	bools   [2]bool             // [false, true], from booleans and "true"/"false"
}

// test is scalar.equal against each value, by set lookups.
func (t *termsTest) test(v any, b *esBudget) bool {
	switch x := v.(type) {
	case string:
		if !b.spendHash(x) {
			return false
		}
		if _, ok := t.strs[x]; ok {
			return true
		}
		if n, ok := parseNumeric(x); ok {
			_, ok = t.nums[n]
			return ok
		}
	case bool:
		return t.bools[b2i(x)]
	default:
		if n, ok := toNum(v); ok {
			_, inNums := t.nums[n]
			_, inStrNums := t.strNums[n]
			return inNums || inStrNums
		}
	}
	return false
}

func (c *esCompiler) termsQuery(body any, path string) (esNode, error) {
	field, spec, err := fieldParams(body, path)
	if err != nil {
		return nil, err
	}
	arr, ok := spec.([]any)
	if !ok {
		return nil, filterError(path, "on %q: expected an array of values, not %s (terms lookup is not supported)", field, jsonType(spec))
	}
	c.terms += len(arr)
	if c.terms > MaxESQueryTerms {
		return nil, filterError(path, "more than %d terms values in the query", MaxESQueryTerms)
	}
	t := &termsTest{strs: map[string]struct{}{}, nums: map[num]struct{}{}, strNums: map[num]struct{}{}}
	for i, e := range arr {
		s, ok := parseScalar(e)
		if !ok {
			return nil, filterError(fmt.Sprintf("%s[%d]", path, i), "on %q: values must be strings, numbers or booleans, not %s", field, jsonType(e))
		}
		switch s.kind {
		case kindString:
			t.strs[s.s] = struct{}{}
			if s.numOK {
				t.strNums[s.n] = struct{}{}
			}
			if s.s == "true" || s.s == "false" {
				t.bools[b2i(s.s == "true")] = true
			}
		case kindNumber:
			t.nums[s.n] = struct{}{}
		case kindBool:
			t.bools[b2i(s.b)] = true
			t.strs[strconv.FormatBool(s.b)] = struct{}{}
		}
	}
	return newFieldNode(field, path, t)
}

// match

// MaxMatchTokens bounds the tokens of one match query.
const MaxMatchTokens = 256

type matchTest struct {
	tokens []string // the query's whitespace-separated tokens
	all    bool     // operator "and"
	val    scalar   // the query value, for non-string fields
	// folded maps each token, case-folded (foldKey), to its index in
	// distinct; an "and" match needs every distinct folded token.
	folded   map[string]int
	distinct int
}

// test is linear in the value: each of its tokens is folded once and
// looked up, instead of compared with every query token.
func (t *matchTest) test(v any, b *esBudget) bool {
	s, ok := v.(string)
	if !ok {
		return t.val.equal(v, false)
	}
	if t.val.kind != kindString {
		return t.val.equal(v, false)
	}
	if !b.spendBytes(s) {
		return false
	}
	var found []bool
	if t.all {
		if t.distinct == 0 {
			return false
		}
		found = make([]bool, t.distinct)
	}
	missing := t.distinct
	for tok := range strings.FieldsSeq(s) {
		i, ok := t.folded[foldKey(tok)]
		if !ok {
			continue
		}
		if !t.all {
			return true
		}
		if !found[i] {
			found[i] = true
			if missing--; missing == 0 {
				return true
			}
		}
	}
	return false
}

// foldKey maps s to a key equal for exactly the strings strings.EqualFold
// finds equal to s: every rune becomes the smallest rune of its Unicode
// simple case-folding orbit.
func foldKey(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || 'a' <= c && c <= 'z' {
			ascii = false
			break
		}
	}
	if ascii {
		return s // no lower-case letter, nothing to fold
	}
	var out strings.Builder
	out.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		out.WriteRune(least)
	}
	return out.String()
}

func matchQuery(body any, path string) (esNode, error) {
	field, spec, err := fieldParams(body, path)
	if err != nil {
		return nil, err
	}
	raw, opts, _, err := specObject(spec, path, field, []string{"query"}, "operator")
	if err != nil {
		return nil, err
	}
	val, ok := parseScalar(raw)
	if !ok {
		return nil, filterError(path, "on %q: query must be a string, number or boolean, not %s", field, jsonType(raw))
	}
	t := &matchTest{val: val}
	if op, ok := opts["operator"]; ok {
		s, _ := op.(string)
		switch strings.ToLower(s) {
		case "or":
		case "and":
			t.all = true
		default:
			return nil, filterError(path, "on %q: operator must be \"or\" or \"and\"", field)
		}
	}
	if val.kind == kindString {
		t.tokens = strings.Fields(val.s)
		if len(t.tokens) > MaxMatchTokens {
			return nil, filterError(path, "on %q: more than %d tokens", field, MaxMatchTokens)
		}
		t.folded = make(map[string]int, len(t.tokens))
		for _, tok := range t.tokens {
			k := foldKey(tok)
			if _, dup := t.folded[k]; !dup {
				t.folded[k] = t.distinct
				t.distinct++
			}
		}
	}
	return newFieldNode(field, path, t)
}

// range

type rangeOp uint8

const (
	opGT rangeOp = iota
	opGTE
	opLT
	opLTE
)

var rangeOps = []string{"gt", "gte", "lt", "lte"}

type rangeBound struct {
	op  rangeOp
	val scalar
}

type rangeTest struct {
	bounds []rangeBound
}

func (t *rangeTest) test(v any, budget *esBudget) bool {
	if s, ok := v.(string); ok && !budget.spend(len(t.bounds)*(1+len(s)/16)) {
		return false
	}
	for _, b := range t.bounds {
		c, ok := b.val.compare(v)
		if !ok {
			return false
		}
		switch b.op {
		case opGT:
			ok = c > 0
		case opGTE:
			ok = c >= 0
		case opLT:
			ok = c < 0
		case opLTE:
			ok = c <= 0
		}
		if !ok {
			return false
		}
	}
	return true
}

func rangeQuery(body any, path string) (esNode, error) {
	field, spec, err := fieldParams(body, path)
	if err != nil {
		return nil, err
	}
	obj, ok := spec.(map[string]any)
	if !ok {
		return nil, filterError(path, "on %q: expected an object of gt, gte, lt, lte, not %s", field, jsonType(spec))
	}
	t := &rangeTest{}
	for k, v := range obj {
		if k == "boost" || k == "_name" {
			continue
		}
		i := indexOf(rangeOps, k)
		if i < 0 {
			return nil, filterError(path, "on %q: unsupported parameter %q; supported: gt, gte, lt, lte", field, short(k))
		}
		if v == nil {
			continue // Elasticsearch: a null bound is unbounded
		}
		s, ok := parseScalar(v)
		if !ok || s.kind == kindBool {
			return nil, filterError(path, "on %q: %s must be a number or a string, not %s", field, k, jsonType(v))
		}
		if s.kind == kindString && (strings.HasPrefix(s.s, "now") || strings.Contains(s.s, "||")) {
			return nil, filterError(path, "on %q: %s: date math is not supported; use an RFC 3339 timestamp", field, k)
		}
		t.bounds = append(t.bounds, rangeBound{op: rangeOp(i), val: s})
	}
	if len(t.bounds) == 0 {
		return nil, filterError(path, "on %q: needs at least one of gt, gte, lt, lte", field)
	}
	// Map iteration order is random; sort for deterministic evaluation.
	sort.Slice(t.bounds, func(i, j int) bool { return t.bounds[i].op < t.bounds[j].op })
	return newFieldNode(field, path, t)
}

// exists

type existsTest struct{}

func (existsTest) test(v any, b *esBudget) bool { return hasValue(v, 0, b) }

// hasValue reports whether v holds a non-null value; like Elasticsearch,
// null, [] and arrays of nulls do not exist, and an object exists when
// something below it does.
func hasValue(v any, depth int, b *esBudget) bool {
	if depth > 10_000 { // encoding/json nests no deeper; this is a guard
		return true
	}
	if !b.spend(1) {
		return false
	}
	switch x := v.(type) {
	case nil:
		return false
	case []any:
		for _, e := range x {
			if hasValue(e, depth+1, b) {
				return true
			}
		}
		return false
	case map[string]any:
		for _, e := range x {
			if hasValue(e, depth+1, b) {
				return true
			}
		}
		return false
	}
	return true
}

func existsQuery(body any, path string) (esNode, error) {
	obj, ok := body.(map[string]any)
	if !ok {
		return nil, filterError(path, "must be an object, not %s", jsonType(body))
	}
	if err := onlyKeys(obj, path, "field", "boost", "_name"); err != nil {
		return nil, err
	}
	field, ok := obj["field"].(string)
	if !ok {
		return nil, filterError(path, "needs \"field\": a field name string")
	}
	return newFieldNode(field, path, existsTest{})
}

// prefix

type prefixTest struct {
	prefix string
	ci     bool
}

func (t prefixTest) test(v any, b *esBudget) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if t.ci {
		if !b.spendBytes(s) {
			return false
		}
		return strings.HasPrefix(strings.ToLower(s), t.prefix)
	}
	return strings.HasPrefix(s, t.prefix)
}

func prefixQuery(body any, path string) (esNode, error) {
	field, s, ci, err := stringPatternParams(body, path, "value")
	if err != nil {
		return nil, err
	}
	return newFieldNode(field, path, prefixTest{prefix: s, ci: ci})
}

// stringPatternParams reads the field, string value (under any of
// valueKeys) and case_insensitive option shared by prefix and wildcard; the
// value comes back lower-cased when case_insensitive is set.
func stringPatternParams(body any, path string, valueKeys ...string) (field, value string, ci bool, err error) {
	field, spec, err := fieldParams(body, path)
	if err != nil {
		return "", "", false, err
	}
	raw, opts, _, err := specObject(spec, path, field, valueKeys, "case_insensitive", "rewrite")
	if err != nil {
		return "", "", false, err
	}
	if ci, err = boolOption(opts, "case_insensitive", path, field); err != nil {
		return "", "", false, err
	}
	s, ok := raw.(string)
	if !ok {
		return "", "", false, filterError(path, "on %q: value must be a string, not %s", field, jsonType(raw))
	}
	if ci {
		s = strings.ToLower(s)
	}
	return field, s, ci, nil
}

// wildcard

type wildcardTest struct {
	pattern []wcToken
	ci      bool
}

func (t *wildcardTest) test(v any, b *esBudget) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if t.ci {
		if !b.spendBytes(s) {
			return false
		}
		s = strings.ToLower(s)
	}
	return wildcardMatch(t.pattern, s, b)
}

func wildcardQuery(body any, path string) (esNode, error) {
	field, s, ci, err := stringPatternParams(body, path, "value", "wildcard")
	if err != nil {
		return nil, err
	}
	return newFieldNode(field, path, &wildcardTest{pattern: parseWildcard(s), ci: ci})
}

// wcToken is one element of a wildcard pattern: a literal rune, '?' (any
// one rune) or '*' (any run of runes).
type wcToken struct {
	kind byte // 'l', '?', '*'
	r    rune
}

// parseWildcard splits a Lucene wildcard pattern; a backslash escapes the
// next rune, consecutive stars collapse into one.
func parseWildcard(p string) []wcToken {
	var out []wcToken
	escaped := false
	for _, r := range p {
		switch {
		case escaped:
			out, escaped = append(out, wcToken{kind: 'l', r: r}), false
		case r == '\\':
			escaped = true
		case r == '*':
			if len(out) == 0 || out[len(out)-1].kind != '*' {
				out = append(out, wcToken{kind: '*'})
			}
		case r == '?':
			out = append(out, wcToken{kind: '?'})
		default:
			out = append(out, wcToken{kind: 'l', r: r})
		}
	}
	if escaped {
		out = append(out, wcToken{kind: 'l', r: '\\'})
	}
	return out
}

// wildcardMatch is the classic greedy matcher with one backtrack point per
// star: O(len(pattern) * len(s)) in the worst case, never exponential, and
// each step is charged to b.
func wildcardMatch(p []wcToken, s string, b *esBudget) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	const chunk = 256 // steps charged at a time
	steps := 0
	for si < len(s) {
		if steps++; steps == chunk {
			if !b.spend(chunk) {
				return false
			}
			steps = 0
		}
		r, size := utf8.DecodeRuneInString(s[si:])
		if pi < len(p) {
			switch t := p[pi]; t.kind {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				pi, si = pi+1, si+size
				continue
			default:
				if t.r == r {
					pi, si = pi+1, si+size
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star swallow one more rune and retry after it.
		_, size = utf8.DecodeRuneInString(s[starS:])
		starS += size
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi].kind == '*' {
		pi++
	}
	return pi == len(p)
}
