package filter

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/jmespath/go-jmespath"
)

// go-jmespath has no evaluation budget and cannot be interrupted, and its
// cost is not linear in the event: every multi-select, projection or
// flatten applied to the result of another multiplies the size of what the
// next step walks ("[data]" followed by ".[@,@][]" n times builds 2^n
// elements; n = 22 took 3.9 s on a 200-byte event). So herald bounds an
// expression before it runs it: the compiler computes, for every node of
// the parsed expression, an upper bound of the size of its result and of
// the work it takes, as a linear function of the size of its input.
// Compile refuses an expression whose work can grow faster than
// JMESPathMaxCostFactor times the event; Match evaluates only when the
// bound, computed with the sizes of the parts of the event the expression
// reads, is within JMESPathCostLimit. The bounds are conservative (values
// go-jmespath shares are counted as copies), never optimistic:
// FuzzJMESPathCostBound checks result sizes against them.
//
// Sizes are in units: one per JSON value (null, boolean, number, string,
// array, object) plus one per byte of every string and object key. Work is
// in the same units: one per value visited, created or compared, one per
// byte scanned or written.
const (
	// JMESPathMaxCostFactor bounds how fast the work of a JMESPath filter
	// may grow with the event: at most this many units per unit of the
	// event it reads. Filters that select, compare, filter and project
	// fields stay under 60, a sort_by over event data under 150; each
	// nested multi-select or projection multiplies the factor, so
	// "[data]" followed by ".[@,@][]" 4 times is refused (1184).
	JMESPathMaxCostFactor = 1000
	// JMESPathCostLimit bounds the work of one evaluation, in the units
	// above: an expression whose bound on an event exceeds it is not
	// evaluated and the event does not match (counted in CostLimitHits).
	// "data.files[?size > `1000`].name" (factor 7) runs while data.files
	// is under 280,000 units, about 280 KB of JSON. The worst expressions
	// at the limit take 10–40 ms of CPU (BenchmarkJMESPathCostLimit): the
	// most one JMESPath filter adds to one event's fan-out.
	JMESPathCostLimit = 2_000_000

	// jmesSortFactor is the evaluations of a sort_by key per element:
	// sort.Stable makes at most about n·(10 + log2(n/20)) comparisons and
	// sort_by evaluates the key twice per comparison. A list that gets
	// sorted has n < JMESPathCostLimit, so log2(n/20) < 17.
	jmesSortFactor = 2 * (10 + 17)
	// jmesMarshalFactor bounds the bytes to_string writes per unit of its
	// argument: a number takes up to 24 bytes (28 with the quotes, colon
	// and comma of an empty key), a byte of a string at most 6 (\u00XX).
	jmesMarshalFactor = 32
	// jmesBoundCap saturates bounds so that arithmetic on them never
	// overflows to Inf (nor Inf·0 to NaN); anything near it is refused.
	jmesBoundCap = 1e18
)

// jmesBound is an upper bound a·s + b + Σ v[i]·size(path i), for s the
// size of a node's input and path i the i-th root path of the expression
// (jmesCost.paths): a chain of fields and indexes applied to the envelope,
// such as data.files, whose size Match measures on the event. Only nodes
// evaluated on the envelope itself have v terms, so that a filter pays for
// the part of the event it reads, not for the whole event.
type jmesBound struct {
	a, b float64
	v    []float64
}

func satur(x float64) float64 { return math.Min(x, jmesBoundCap) }

func (f jmesBound) plus(g jmesBound) jmesBound {
	h := jmesBound{a: satur(f.a + g.a), b: satur(f.b + g.b)}
	h.v = make([]float64, max(len(f.v), len(g.v)))
	for i := range h.v {
		h.v[i] = satur(f.coef(i) + g.coef(i))
	}
	return h
}

func (f jmesBound) times(k float64) jmesBound {
	h := jmesBound{a: satur(f.a * k), b: satur(f.b * k), v: make([]float64, len(f.v))}
	for i, c := range f.v {
		h.v[i] = satur(c * k)
	}
	return h
}

func (f jmesBound) max(g jmesBound) jmesBound {
	h := jmesBound{a: math.Max(f.a, g.a), b: math.Max(f.b, g.b)}
	h.v = make([]float64, max(len(f.v), len(g.v)))
	for i := range h.v {
		h.v[i] = math.Max(f.coef(i), g.coef(i))
	}
	return h
}

func (f jmesBound) coef(i int) float64 {
	if i < len(f.v) {
		return f.v[i]
	}
	return 0
}

// of composes f after g: the bound of a node applied to an output bounded
// by g. f is a bound of a node that does not read the envelope itself, so
// it has no v terms.
func (f jmesBound) of(g jmesBound) jmesBound {
	h := g.times(f.a)
	h.b = satur(h.b + f.b)
	return h
}

// perUnit is a bound per unit of an input made of parts, for a bound f
// without v terms: for parts of sizes s_i (each at least 1, so their count
// is at most Σs_i), Σ(a·s_i + b) is at most (a+b)·Σs_i.
func (f jmesBound) perUnit() float64 { return satur(f.a + f.b) }

// factor is the most f can grow per unit of event: every part of the
// envelope is at most its size.
func (f jmesBound) factor() float64 {
	k := f.a
	for _, c := range f.v {
		k = satur(k + c)
	}
	return k
}

// jmesStep is one step of a root path: a field name or an index.
type jmesStep struct {
	name    string
	index   int
	isIndex bool
}

// jmesPath is a chain of fields and indexes applied to the envelope.
type jmesPath struct {
	steps []jmesStep
	key   string // the path as text, unique per path: the Input's cache key
}

// jmesCost is the analysis of an expression.
type jmesCost struct {
	// work bounds the units of one evaluation, out the size of its result.
	work, out jmesBound
	// paths are the root paths the bound reads.
	paths []jmesPath
	// sortsInPlace: the expression calls sort_by, which go-jmespath runs
	// in place on the list it is given, a list of the shared Input.
	sortsInPlace bool

	pathIndex map[string]int // paths by key, during the analysis
}

// at evaluates the work bound on an event: envSize is the size of the
// envelope, pathSize measures the root paths. It stops measuring once the
// bound passes limit.
func (c *jmesCost) at(envSize float64, pathSize func(p *jmesPath) float64, limit float64) float64 {
	return c.eval(c.work, envSize, pathSize, limit)
}

// eval evaluates the bound f of the expression as at does.
func (c *jmesCost) eval(f jmesBound, envSize float64, pathSize func(p *jmesPath) float64, limit float64) float64 {
	total := satur(satur(f.a*envSize) + f.b)
	for i, k := range f.v {
		if total > limit {
			break
		}
		if k > 0 {
			total = satur(total + satur(k*pathSize(&c.paths[i])))
		}
	}
	return total
}

// jmesKind mirrors go-jmespath's unexported astNodeType (v0.4.0), read by
// reflection: the library has no other way to look at a parsed expression.
// TestJMESPathASTKinds checks the mirror against the library's own names.
type jmesKind int

const (
	jkEmpty jmesKind = iota
	jkComparator
	jkCurrentNode
	jkExpRef
	jkFunctionExpression
	jkField
	jkFilterProjection
	jkFlatten
	jkIdentity
	jkIndex
	jkIndexExpression
	jkKeyValPair
	jkLiteral
	jkMultiSelectHash
	jkMultiSelectList
	jkOrExpression
	jkAndExpression
	jkNotExpression
	jkPipe
	jkProjection
	jkSubexpression
	jkSlice
	jkValueProjection
	jkCount // not a kind: the number of kinds
)

// jmesNode is the part of a go-jmespath AST node the analysis needs.
type jmesNode struct {
	kind     jmesKind
	name     string  // field, function or hash key name ("" if none)
	index    int     // index of an index node
	litSize  float64 // size of a literal
	children []jmesNode
}

// errJMESPathAST means the parsed expression does not have the shape this
// file was written for, i.e. go-jmespath changed: refuse rather than run
// an expression of unknown cost.
type errJMESPathAST struct{ what string }

func (e errJMESPathAST) Error() string {
	return "cannot analyse the cost of the parsed expression (" + e.what + ")"
}

// jmesParse parses src with the same parser jmespath.Compile uses and
// copies the AST out.
func jmesParse(src string) (jmesNode, error) {
	ast, err := jmespath.NewParser().Parse(src)
	if err != nil {
		return jmesNode{}, err
	}
	return jmesReadNode(reflect.ValueOf(ast))
}

// jmesReadNode copies one go-jmespath ASTNode {nodeType astNodeType; value
// interface{}; children []ASTNode}. Unexported fields can be read through
// reflect, as long as nothing calls Interface() on them.
func jmesReadNode(v reflect.Value) (jmesNode, error) {
	if v.Kind() != reflect.Struct || v.NumField() != 3 {
		return jmesNode{}, errJMESPathAST{"node is not a 3-field struct"}
	}
	typ, val, kids := v.Field(0), v.Field(1), v.Field(2)
	if typ.Kind() != reflect.Int || val.Kind() != reflect.Interface || kids.Kind() != reflect.Slice {
		return jmesNode{}, errJMESPathAST{"unexpected node fields"}
	}
	n := jmesNode{kind: jmesKind(typ.Int())}
	if n.kind < 0 || n.kind >= jkCount {
		return jmesNode{}, errJMESPathAST{fmt.Sprintf("unknown node type %d", n.kind)}
	}
	switch e := val.Elem(); e.Kind() {
	case reflect.String:
		n.name = e.String()
	case reflect.Int:
		n.index = int(e.Int())
	}
	if n.kind == jkIndex && val.Elem().Kind() != reflect.Int {
		return jmesNode{}, errJMESPathAST{"index without an int"}
	}
	if n.kind == jkLiteral {
		size, ok := jmesReflectSize(val.Elem(), 0)
		if !ok {
			return jmesNode{}, errJMESPathAST{"unexpected literal"}
		}
		n.litSize = size
	}
	if k := kids.Len(); k > 0 {
		n.children = make([]jmesNode, k)
		for i := range k {
			c, err := jmesReadNode(kids.Index(i))
			if err != nil {
				return jmesNode{}, err
			}
			n.children[i] = c
		}
	}
	return n, nil
}

// jmesReflectSize is jmesValueSize for a literal seen through reflect.
func jmesReflectSize(v reflect.Value, depth int) (float64, bool) {
	if depth > 10_000 { // encoding/json nests no deeper
		return 0, false
	}
	if v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Invalid, reflect.Bool, reflect.Float64:
		return 1, true
	case reflect.String:
		return 1 + float64(v.Len()), true
	case reflect.Slice:
		size := 1.0
		for i := range v.Len() {
			s, ok := jmesReflectSize(v.Index(i), depth+1)
			if !ok {
				return 0, false
			}
			size += s
		}
		return size, true
	case reflect.Map:
		size := 1.0
		for it := v.MapRange(); it.Next(); {
			s, ok := jmesReflectSize(it.Value(), depth+1)
			if !ok || it.Key().Kind() != reflect.String {
				return 0, false
			}
			size += float64(it.Key().Len()) + s
		}
		return size, true
	}
	return 0, false
}

// jmesValueSize is the size in units of a decoded JSON value.
func jmesValueSize(v any) float64 {
	switch x := v.(type) {
	case string:
		return 1 + float64(len(x))
	case []any:
		size := 1.0
		for _, e := range x {
			size += jmesValueSize(e)
		}
		return size
	case map[string]any:
		size := 1.0
		for k, e := range x {
			size += float64(len(k)) + jmesValueSize(e)
		}
		return size
	}
	return 1
}

// jmesAnalyze bounds the cost of the expression n.
func jmesAnalyze(n *jmesNode) (*jmesCost, error) {
	c := &jmesCost{pathIndex: map[string]int{}}
	out, work, err := c.node(n, true)
	if err != nil {
		return nil, err
	}
	c.work, c.out = work, out
	if c.sortsInPlace {
		// Match evaluates on a private copy of the envelope.
		c.work = c.work.plus(jmesBound{a: 1})
	}
	c.pathIndex = nil
	return c, nil
}

var (
	jmesOne  = jmesBound{b: 1}
	jmesSame = jmesBound{a: 1}
)

// rootPath returns the steps of n when n is a chain of fields and indexes
// (a.b[0] | c included: a pipe is evaluated as a subexpression).
func rootPath(n *jmesNode, steps []jmesStep) ([]jmesStep, bool) {
	switch n.kind {
	case jkField:
		return append(steps, jmesStep{name: n.name}), true
	case jkIndex:
		return append(steps, jmesStep{index: n.index, isIndex: true}), true
	case jkSubexpression, jkIndexExpression, jkPipe:
		if len(n.children) == 0 {
			return nil, false
		}
		for i := range n.children {
			var ok bool
			if steps, ok = rootPath(&n.children[i], steps); !ok {
				return nil, false
			}
		}
		return steps, true
	}
	return nil, false
}

// pathVar returns the bound "size of root path steps".
func (c *jmesCost) pathVar(steps []jmesStep) jmesBound {
	var key strings.Builder
	for _, st := range steps {
		if st.isIndex {
			fmt.Fprintf(&key, "[%d]", st.index)
		} else {
			key.WriteString("." + strconv.Quote(st.name))
		}
	}
	i, ok := c.pathIndex[key.String()]
	if !ok {
		i = len(c.paths)
		c.paths = append(c.paths, jmesPath{steps: steps, key: key.String()})
		c.pathIndex[key.String()] = i
	}
	v := make([]float64, i+1)
	v[i] = 1
	return jmesBound{v: v}
}

// node returns the bounds of n's output size and of its work, both as
// functions of the size of its input. root tells that the input is the
// envelope.
func (c *jmesCost) node(n *jmesNode, root bool) (out, work jmesBound, err error) {
	if root {
		if steps, ok := rootPath(n, nil); ok {
			return c.pathVar(steps), jmesBound{b: float64(len(steps))}, nil
		}
	}
	switch n.kind {
	case jkEmpty, jkExpRef:
		// An empty node is an evaluation error; an expref outside a
		// function argument is a constant.
		return jmesOne, jmesOne, nil
	case jkIdentity, jkCurrentNode, jkField, jkIndex:
		return jmesSame, jmesOne, nil
	case jkSlice:
		return jmesSame, jmesBound{a: 1, b: 1}, nil
	case jkLiteral:
		return jmesBound{b: n.litSize}, jmesOne, nil
	case jkKeyValPair:
		if len(n.children) != 1 {
			return out, work, errJMESPathAST{"key-value pair without one child"}
		}
		return c.node(&n.children[0], root)
	case jkComparator:
		outs, works, err := c.nodes(n.children, 2, root)
		if err != nil {
			return out, work, err
		}
		// Equality compares both sides in depth.
		work = works[0].plus(works[1]).plus(outs[0]).plus(outs[1]).plus(jmesOne)
		return jmesOne, work, nil
	case jkAndExpression, jkOrExpression:
		outs, works, err := c.nodes(n.children, 2, root)
		if err != nil {
			return out, work, err
		}
		return outs[0].max(outs[1]), works[0].plus(works[1]).plus(jmesOne), nil
	case jkNotExpression:
		_, works, err := c.nodes(n.children, 1, root)
		if err != nil {
			return out, work, err
		}
		return jmesOne, works[0].plus(jmesOne), nil
	case jkPipe, jkSubexpression, jkIndexExpression:
		if len(n.children) == 0 {
			return out, work, errJMESPathAST{"empty sequence"}
		}
		// Each step runs on the output of the one before.
		out, work = jmesSame, jmesBound{}
		for i := range n.children {
			o, w, err := c.node(&n.children[i], root && i == 0)
			if err != nil {
				return out, work, err
			}
			if i == 0 {
				out, work = o, w
				continue
			}
			work = work.plus(w.of(out))
			out = o.of(out)
		}
		return out, work, nil
	case jkFlatten:
		outs, works, err := c.nodes(n.children, 1, root)
		if err != nil {
			return out, work, err
		}
		return outs[0], works[0].plus(outs[0]).plus(jmesOne), nil
	case jkProjection, jkValueProjection, jkFilterProjection:
		want := 2
		if n.kind == jkFilterProjection {
			want = 3
		}
		if len(n.children) != want {
			return out, work, errJMESPathAST{fmt.Sprintf("%d children, want %d", len(n.children), want)}
		}
		// The left side runs on the input, the others on each element.
		list, work, err := c.node(&n.children[0], root)
		if err != nil {
			return out, work, err
		}
		outs, works, err := c.nodes(n.children[1:], want-1, false)
		if err != nil {
			return out, work, err
		}
		if n.kind == jkValueProjection {
			// go-jmespath projects the n values of an object plus n
			// leading nils (it appends to a slice made with length n).
			list = list.times(2)
		}
		perOut := outs[0].perUnit()
		perWork := works[0].perUnit() + 1
		if n.kind == jkFilterProjection {
			perWork += works[1].perUnit()
		}
		out = jmesBound{a: perOut, b: 1}.of(list)
		work = work.plus(jmesBound{a: perWork, b: 1}.of(list))
		return out, work, nil
	case jkMultiSelectList, jkMultiSelectHash:
		out, work = jmesOne, jmesOne
		for i := range n.children {
			o, w, err := c.node(&n.children[i], root)
			if err != nil {
				return out, work, err
			}
			out = out.plus(o).plus(jmesOne)
			if n.kind == jkMultiSelectHash {
				out = out.plus(jmesBound{b: float64(len(n.children[i].name))})
			}
			work = work.plus(w).plus(jmesOne)
		}
		return out, work, nil
	case jkFunctionExpression:
		return c.function(n, root)
	}
	return out, work, errJMESPathAST{fmt.Sprintf("unhandled node type %d", n.kind)}
}

// nodes analyses the children of a node that must have exactly want.
func (c *jmesCost) nodes(children []jmesNode, want int, root bool) (outs, works []jmesBound, err error) {
	if len(children) != want {
		return nil, nil, errJMESPathAST{fmt.Sprintf("%d children, want %d", len(children), want)}
	}
	outs, works = make([]jmesBound, want), make([]jmesBound, want)
	for i := range children {
		if outs[i], works[i], err = c.node(&children[i], root); err != nil {
			return nil, nil, err
		}
	}
	return outs, works, nil
}

// function bounds a function call. Its arguments are evaluated first
// (whatever the function, known or not); exprefs are evaluated by the
// function on each element of its other arguments.
func (c *jmesCost) function(n *jmesNode, root bool) (out, work jmesBound, err error) {
	var outs []jmesBound // output of each plain (non-expref) argument
	var args jmesBound   // Σ outs
	var perElem float64  // work of the expref keys, per unit of an element
	var perOut float64   // output of the expref keys, per unit of an element
	work = jmesOne
	for i := range n.children {
		a := &n.children[i]
		if a.kind == jkExpRef {
			if len(a.children) != 1 {
				return out, work, errJMESPathAST{"expref without one child"}
			}
			o, w, err := c.node(&a.children[0], false)
			if err != nil {
				return out, work, err
			}
			perElem = satur(perElem + w.perUnit() + 1)
			perOut = satur(perOut + o.perUnit())
			continue
		}
		o, w, err := c.node(a, root)
		if err != nil {
			return out, work, err
		}
		// Type checks copy arrays of numbers or strings.
		work = work.plus(w).plus(o)
		args = args.plus(o)
		outs = append(outs, o)
	}
	if len(outs) == 0 {
		outs = append(outs, jmesOne) // an arity error
	}
	first := outs[0]
	perList := jmesBound{a: perElem, b: 1}.of(args) // the keys on every element
	switch n.name {
	case "length", "abs", "ceil", "floor", "avg", "sum", "to_number",
		"starts_with", "ends_with", "contains":
		// Linear scans at most, covered by the type checks.
		return jmesOne, work, nil
	case "type":
		return jmesBound{b: 1 + float64(len("boolean"))}, work, nil
	case "max", "min":
		return first, work, nil
	case "keys", "values":
		return first, work.plus(first), nil
	case "reverse":
		// Reversing a string by runes turns each invalid UTF-8 byte (a
		// string literal may hold one) into a 3-byte U+FFFD.
		out = first.times(3)
		return out, work.plus(out), nil
	case "sort":
		return first, work.plus(first.times(jmesSortFactor)), nil
	case "to_array":
		return first.plus(jmesOne), work, nil
	case "not_null":
		return args, work, nil
	case "merge":
		return args.plus(jmesOne), work.plus(args), nil
	case "to_string":
		out = first.times(jmesMarshalFactor)
		return out, work.plus(out), nil
	case "join":
		if len(outs) != 2 {
			return jmesOne, work, nil // an arity error
		}
		sep, list := outs[0], outs[1]
		if sep.factor() > 0 {
			return out, work, errJMESPathQuadratic
		}
		// Every element of the list may get a separator.
		out = list.times(1 + sep.b)
		return out, work.plus(out), nil
	case "map":
		out = jmesBound{a: perOut, b: 1}.of(args)
		return out, work.plus(perList), nil
	case "max_by", "min_by":
		return args, work.plus(perList), nil
	case "sort_by":
		c.sortsInPlace = true
		return args, work.plus(perList.times(jmesSortFactor)), nil
	}
	// An unknown function fails after its arguments were evaluated; an
	// expref passed to a function that takes none is never evaluated.
	return jmesOne, work, nil
}

// errJMESPathQuadratic refuses join(sep, list) with a separator taken from
// the event: its output grows with the product of two parts of the event.
var errJMESPathQuadratic = errors.New("join() separator must not depend on the event (use a literal such as ', '): its cost would grow with the square of the event size")
