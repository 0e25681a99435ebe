package filter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jmespath/go-jmespath"
)

// MaxJMESPathLength bounds the source of a JMESPath expression, in bytes.
// Its cost is bounded by JMESPathMaxCostFactor and JMESPathCostLimit
// (jmescost.go).
const MaxJMESPathLength = 4096

type jmesMatcher struct {
	expr *jmespath.JMESPath
	cost *jmesCost
}

func compileJMESPath(src string) (m Matcher, err error) {
	if len(src) > MaxJMESPathLength {
		return nil, filterError(fieldJMESPath, "expression is %d bytes; the limit is %d", len(src), MaxJMESPathLength)
	}
	// go-jmespath is unmaintained; a parser panic must not take the API
	// request down with it.
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, filterError(fieldJMESPath, "expression cannot be parsed: %v", r)
		}
	}()
	expr, err := jmespath.Compile(src)
	if err != nil {
		return nil, filterError(fieldJMESPath, "%s", jmesMessage(err))
	}
	ast, err := jmesParse(src)
	if err != nil {
		return nil, filterError(fieldJMESPath, "%s", jmesMessage(err))
	}
	cost, err := jmesAnalyze(&ast)
	if err != nil {
		return nil, filterError(fieldJMESPath, "expression refused: %s", err)
	}
	if f := cost.work.factor(); f > JMESPathMaxCostFactor {
		return nil, filterError(fieldJMESPath,
			"expression refused: its work can grow to %s times the event size, the limit is %d "+
				"(each multi-select, projection or flatten applied to the result of another multiplies it)",
			jmesFactor(f), JMESPathMaxCostFactor)
	}
	if cost.work.b > JMESPathCostLimit {
		return nil, filterError(fieldJMESPath,
			"expression refused: its work exceeds the limit of %d units whatever the event (multi-selects or projections of large literals)",
			JMESPathCostLimit)
	}
	return &jmesMatcher{expr: expr, cost: cost}, nil
}

// jmesFactor renders a cost factor for a message; bounds saturate at
// jmesBoundCap.
func jmesFactor(f float64) string {
	if f >= 1e15 {
		return "more than 10^15"
	}
	return strconv.FormatFloat(math.Ceil(f), 'f', 0, 64)
}

// jmesMessage renders a go-jmespath compile error with its position; the
// library's Error() omits it. Invalid JSON literals come back as plain
// encoding/json errors.
func jmesMessage(err error) string {
	var se jmespath.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error: %s at offset %d", strings.TrimPrefix(se.Error(), "SyntaxError: "), se.Offset)
	}
	return "syntax error: " + err.Error()
}

// Match evaluates the expression on the envelope and matches when the
// result is truthy. An evaluation error is no match, as in DSS v2, and so
// is an event on which the expression's cost bound exceeds
// JMESPathCostLimit: it is not evaluated.
func (m *jmesMatcher) Match(in *Input) (ok bool) {
	if in == nil {
		in = emptyInput
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	doc, size := in.jmesDoc()
	if m.cost.at(size, in.jmesPathSize, JMESPathCostLimit) > JMESPathCostLimit {
		costLimitHits.jmespath.Add(1)
		return false
	}
	if m.cost.sortsInPlace {
		// sort_by sorts the list it is given in place: give it a copy, not
		// the tree other subscriptions' filters read, maybe concurrently.
		doc, _ = toFloatTree(in.envelope).(map[string]any)
	}
	out, err := m.expr.Search(doc)
	if err != nil {
		return false
	}
	return jmesTruthy(out)
}

// jmesTruthy applies JMESPath truthiness: false, null, "", [] and {} are
// false; everything else, every number included, is true.
func jmesTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}
