package filter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jmespath/go-jmespath"
)

// MaxJMESPathLength bounds the source of a JMESPath expression, in bytes.
// go-jmespath has no evaluation budget; its work is bounded by the
// expression and the event size, and this keeps the expression side small.
const MaxJMESPathLength = 4096

type jmesMatcher struct {
	expr *jmespath.JMESPath
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
	return &jmesMatcher{expr: expr}, nil
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
// result is truthy. An evaluation error is no match, as in DSS v2.
func (m *jmesMatcher) Match(in *Input) (ok bool) {
	if in == nil {
		in = emptyInput
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	out, err := m.expr.Search(in.jmesDoc())
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
