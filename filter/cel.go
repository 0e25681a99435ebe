package filter

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// CEL limits. A filter runs for every event of its subscription, in the
// delivery path, so its worst case must stay small and bounded.
const (
	// MaxCELLength bounds the source of a CEL expression, in bytes.
	MaxCELLength = 4096
	// CELCostLimit bounds the runtime cost of one evaluation (cel-go cost
	// units: about one per operation, strings and lists charged by size).
	// Reaching it ends the evaluation as "no match". Typical filters cost
	// under 100 and one exists() over a 1000-element list about 6000; an
	// expression that runs into the limit stops after 5–8 ms of CPU on a
	// 2-vCPU VM (BenchmarkCELCostLimit): the worst one filter can add to
	// one event's fan-out.
	CELCostLimit = 50_000
	// celNestingLimit bounds the parse depth, well below cel-go's default of
	// 250, to keep deep recursion out of the checker and planner.
	celNestingLimit = 64
	// celRegexProgramLimit bounds the compiled size of a constant regex.
	celRegexProgramLimit = 1000
)

// celEnv is built once: an Env is expensive to create and safe to share.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("type", cel.StringType),
		cel.Variable("key", cel.StringType),
		cel.Variable("version", cel.IntType),
		cel.Variable("has_version", cel.BoolType),
		cel.Variable("data", cel.DynType),
		cel.Variable("event", cel.DynType),
		ext.Strings(),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxCELLength),
		cel.ParserRecursionLimit(celNestingLimit),
		cel.RegexProgramSizeLimit(celRegexProgramLimit),
	)
})

type celMatcher struct {
	prg cel.Program
}

func compileCEL(src string) (Matcher, error) {
	if len(src) > MaxCELLength {
		return nil, filterError(fieldCEL, "expression is %d bytes; the limit is %d", len(src), MaxCELLength)
	}
	if !utf8.ValidString(src) {
		return nil, filterError(fieldCEL, "expression is not valid UTF-8")
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("error building CEL environment: %w", err)
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, filterError(fieldCEL, "%s", celIssuesMessage(iss))
	}
	if out := ast.OutputType(); !out.IsExactType(types.BoolType) {
		return nil, filterError(fieldCEL,
			"expression must evaluate to bool, not %s (compare explicitly, e.g. data.flag == true)", out)
	}
	prg, err := env.Program(ast,
		cel.CostLimit(CELCostLimit),
		cel.EvalOptions(cel.OptOptimize),
	)
	if err != nil {
		return nil, filterError(fieldCEL, "%s", err)
	}
	return &celMatcher{prg: prg}, nil
}

func (m *celMatcher) Match(in *Input) (ok bool) {
	if in == nil {
		in = emptyInput
	}
	// cel-go recovers from panics in its own evaluation; this guards the
	// delivery path against one that escapes it anyway.
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	out, _, err := m.prg.Eval(celActivation{in})
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			costLimitHits.cel.Add(1)
		}
		return false
	}
	b, isBool := out.(types.Bool)
	return isBool && bool(b)
}

// celActivation resolves the filter variables from an Input without
// building a map per evaluation.
type celActivation struct{ in *Input }

func (a celActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "type":
		return types.String(a.in.typ), true
	case "key":
		return types.String(a.in.key), true
	case "version":
		return types.Int(a.in.version), true
	case "has_version":
		return types.Bool(a.in.hasVersion), true
	case "data":
		return a.in.celData, true
	case "event":
		return a.in.celEvent, true
	}
	return nil, false
}

func (celActivation) Parent() interpreter.Activation { return nil }

// celMaxReported and celMaxMessage keep compile errors short: cel-go's own
// rendering repeats the source line under each of up to 100 errors, which
// for a 4 KiB line of junk is 400 KB of response body.
const (
	celMaxReported = 3
	celMaxMessage  = 200
)

// celIssuesMessage renders the first few compile errors as "line L,
// column C: message", syntax errors in words (celSyntaxWords), without
// source snippets.
func celIssuesMessage(iss *cel.Issues) string {
	errs := iss.Errors()
	var b strings.Builder
	for i, e := range errs {
		if i == celMaxReported {
			fmt.Fprintf(&b, "; and %d more errors", len(errs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		msg := celSyntaxWords(e.Message)
		if len(msg) > celMaxMessage {
			msg = strings.ToValidUTF8(msg[:celMaxMessage], "") + "…"
		}
		fmt.Fprintf(&b, "line %d, column %d: %s", e.Location.Line(), e.Location.Column()+1, msg)
	}
	return b.String()
}
