package filter

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ---- field paths ----

// fieldPath is a dotted path; segment i is full[start[i]:end[i]]. Keeping
// the full string lets the walk look up keys that themselves contain dots
// ({"a.b": 1} answers "a.b") without building strings.
type fieldPath struct {
	full       string
	start, end []int
}

func parseFieldPath(field, path string) (fieldPath, error) {
	if field == "" {
		return fieldPath{}, filterError(path, "empty field name")
	}
	if len(field) > maxFieldLength {
		return fieldPath{}, filterError(path, "field name longer than %d bytes", maxFieldLength)
	}
	fp := fieldPath{full: field}
	pos := 0
	for seg := range strings.SplitSeq(field, ".") {
		if seg == "" {
			return fieldPath{}, filterError(path, "field %q has an empty path segment", field)
		}
		fp.start = append(fp.start, pos)
		fp.end = append(fp.end, pos+len(seg))
		pos += len(seg) + 1
	}
	if len(fp.start) > maxFieldSegments {
		return fieldPath{}, filterError(path, "field %q has more than %d segments", field, maxFieldSegments)
	}
	return fp, nil
}

// walk follows the path from segment i through v and calls t.test on every
// value found, stopping at the first true. Arrays are walked element by
// element at every step and at the end, as Elasticsearch flattens them.
func (p *fieldPath) walk(v any, i int, t leafTest, b *esBudget) bool {
	if !b.spend(1) {
		return false
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if p.walk(e, i, t, b) {
				return true
			}
		}
		return false
	case map[string]any:
		if i == len(p.start) {
			return t.test(v, b)
		}
		for j := i; j < len(p.start); j++ {
			if c, ok := x[p.full[p.start[i]:p.end[j]]]; ok && p.walk(c, j+1, t, b) {
				return true
			}
		}
		return false
	}
	return i == len(p.start) && t.test(v, b)
}

// ---- scalars and numbers ----

type scalarKind uint8

const (
	kindString scalarKind = iota + 1
	kindNumber
	kindBool
)

// scalar is a query value. A string that reads as a number also carries
// it, so "5" and 5 compare equal in either direction: Elasticsearch coerces
// query values to the field type, and without a mapping the document value
// is the only type there is.
type scalar struct {
	kind  scalarKind
	s     string
	n     num
	numOK bool
	b     bool
}

func parseScalar(v any) (scalar, bool) {
	switch x := v.(type) {
	case string:
		n, ok := parseNumeric(x)
		return scalar{kind: kindString, s: x, n: n, numOK: ok}, true
	case json.Number:
		return scalar{kind: kindNumber, n: jsonNum(x.String()), numOK: true}, true
	case bool:
		return scalar{kind: kindBool, b: x}, true
	}
	return scalar{}, false
}

// equal reports whether document value v equals q.
func (q scalar) equal(v any, ci bool) bool {
	switch x := v.(type) {
	case string:
		switch q.kind {
		case kindString:
			if ci {
				return strings.EqualFold(x, q.s)
			}
			return x == q.s
		case kindNumber:
			n, ok := parseNumeric(x)
			return ok && n == q.n
		case kindBool:
			return x == strconv.FormatBool(q.b)
		}
	case bool:
		switch q.kind {
		case kindBool:
			return x == q.b
		case kindString:
			return q.s == strconv.FormatBool(x)
		}
	default:
		n, ok := toNum(v)
		return ok && q.numOK && n == q.n
	}
	return false
}

// compare orders document value v against q: strings lexicographically
// (RFC 3339 timestamps in one zone order correctly that way), numbers
// numerically, a string and a number numerically when the string reads as
// one. ok is false when they do not compare.
func (q scalar) compare(v any) (int, bool) {
	switch x := v.(type) {
	case string:
		if q.kind == kindString {
			return strings.Compare(x, q.s), true
		}
		n, ok := parseNumeric(x)
		if !ok {
			return 0, false
		}
		return n.cmp(q.n), true
	case bool, nil, map[string]any:
		return 0, false
	default:
		n, ok := toNum(v)
		if !ok || !q.numOK {
			return 0, false
		}
		return n.cmp(q.n), true
	}
}

// num is a normalized number: integral values within int64 are ints, so
// that 5 and 5.0 are the same map key.
type num struct {
	i     int64
	f     float64
	isInt bool
}

func toNum(v any) (num, bool) {
	switch x := v.(type) {
	case int64:
		return num{i: x, isInt: true}, true
	case float64:
		return floatNum(x), true
	case int:
		return num{i: int64(x), isInt: true}, true
	}
	return num{}, false
}

func floatNum(f float64) num {
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return num{i: int64(f), isInt: true}
	}
	return num{f: f}
}

func (a num) float() float64 {
	if a.isInt {
		return float64(a.i)
	}
	return a.f
}

func (a num) cmp(b num) int {
	if a.isInt && b.isInt {
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
		return 0
	}
	fa, fb := a.float(), b.float()
	switch {
	case fa < fb:
		return -1
	case fa > fb:
		return 1
	}
	return 0
}

// jsonNum reads a number literal the JSON decoder accepted; literals beyond
// float64 range become ±Inf, which still order correctly.
func jsonNum(s string) num {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return num{i: i, isInt: true}
	}
	f, _ := strconv.ParseFloat(s, 64)
	return floatNum(f)
}

// parseNumeric reads s as a number when it looks like a JSON number; Go's
// parser alone would also take "NaN", "Inf" and hex.
func parseNumeric(s string) (num, bool) {
	if s == "" || len(s) > 64 {
		return num{}, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			return num{}, false
		}
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return num{i: i, isInt: true}, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return num{}, false
	}
	return floatNum(f), true
}

// ---- helpers ----

func onlyKeys(obj map[string]any, path string, allowed ...string) error {
	for k := range obj {
		if !contains(allowed, k) {
			return filterError(path, "unsupported parameter %q; allowed: %s", short(k), strings.Join(allowed, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool { return indexOf(list, s) >= 0 }

func indexOf(list []string, s string) int {
	for i, e := range list {
		if e == s {
			return i
		}
	}
	return -1
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// quoteKeys lists obj's keys, sorted and quoted, without the skipped ones.
func quoteKeys(obj map[string]any, skip ...string) string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		if !contains(skip, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return quoteList(keys)
}

// quoteList quotes keys for a message, at most five of them.
func quoteList(keys []string) string {
	const maxKeys = 5
	q := make([]string, 0, min(len(keys), maxKeys+1))
	for i, k := range keys {
		if i == maxKeys {
			q = append(q, fmt.Sprintf("and %d more", len(keys)-i))
			break
		}
		q = append(q, strconv.Quote(short(k)))
	}
	return strings.Join(q, ", ")
}

// short cuts s for an error message: query keys are client input of up to
// MaxESQueryBytes.
func short(s string) string {
	const maxLen = 64
	if len(s) <= maxLen {
		return s
	}
	return strings.ToValidUTF8(s[:maxLen], "") + "…"
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number, float64, int64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}
