package filter

import (
	"strings"

	"github.com/heraldhq/herald"
)

// Matcher decides whether an event matches. Implementations are safe for
// concurrent use. Match never panics and never blocks: an evaluation error
// (missing field, wrong type, cost limit) is "no match".
type Matcher interface {
	Match(in *Input) bool
}

// Error fields, one per filter kind; see Compile.
const (
	fieldFilter   = "filter"
	fieldCEL      = "filter.cel"
	fieldJMESPath = "filter.jmespath"
	fieldESQuery  = "filter.es_query"
)

// Compile compiles f. A nil or empty filter matches everything.
//
// Errors are *herald.Error with Code herald.CodeInvalidFilter, Field
// "filter.cel", "filter.jmespath" or "filter.es_query" (an ES query error
// names the JSON path of the fault below it, e.g.
// "filter.es_query.query.bool.must[1]"), or "filter" when more than one kind
// is set, and the compiler's message.
func Compile(f *herald.Filter) (Matcher, error) {
	if f.IsZero() {
		return matchAll{}, nil
	}
	var kinds []string
	if f.CEL != "" {
		kinds = append(kinds, "cel")
	}
	if f.JMESPath != "" {
		kinds = append(kinds, "jmespath")
	}
	if len(f.ESQuery) > 0 {
		kinds = append(kinds, "es_query")
	}
	if len(kinds) > 1 {
		return nil, herald.FieldErrorf(herald.CodeInvalidFilter, fieldFilter,
			"set exactly one of cel, jmespath, es_query (got %s)", strings.Join(kinds, ", "))
	}
	switch kinds[0] {
	case "cel":
		return compileCEL(f.CEL)
	case "jmespath":
		return compileJMESPath(f.JMESPath)
	default:
		return compileESQuery(f.ESQuery)
	}
}

// matchAll is the matcher of the empty filter.
type matchAll struct{}

func (matchAll) Match(*Input) bool { return true }

// emptyInput stands in for a nil *Input so that Match(nil) cannot panic.
var emptyInput = NewInput(nil)

func filterError(field, format string, args ...any) *herald.Error {
	return herald.FieldErrorf(herald.CodeInvalidFilter, field, format, args...)
}
