package filter

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/jmespath/go-jmespath"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// jmesExponential is the expression of issue 10: "[data]" followed by
// ".[@,@][]" n times doubles the list n times (3.9 s at n = 22 on a
// 200-byte event before the cost bound).
func jmesExponential(n int) string {
	return "[data]" + strings.Repeat(".[@,@][]", n)
}

// smallEvent is the 200-byte event of the issue.
func smallEvent() *herald.Event {
	return &herald.Event{ID: "evt_s", Type: "order.created", Key: "k",
		Data: json.RawMessage(`{"order": {"id": "o-1234", "total": 99.5, "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}], "customer": {"id": "c-9", "tier": "gold"}, "tags": ["new", "web"]}}`)}
}

func jmesCostOf(t *testing.T, expr string) *jmesCost {
	t.Helper()
	ast, err := jmesParse(expr)
	require.NoError(t, err)
	c, err := jmesAnalyze(&ast)
	require.NoError(t, err)
	return c
}

func TestJMESPathCostRefused(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name, expr, msg string
	}{
		{"ExponentialN22", jmesExponential(22), "more than 10^15 times the event size, the limit is 1000"},
		{"ExponentialN5", jmesExponential(5), "the limit is 1000"},
		{"ExponentialN4", jmesExponential(4), "1184 times the event size, the limit is 1000"},
		{"WideMultiSelects", "data.tags[*].[@,@,@,@,@,@,@,@][].[@,@,@,@,@,@,@,@][].[@,@,@,@,@,@,@,@][]", "the limit is 1000"},
		{"NestedValueProjections", "*.*.*.*.*.*.*.*", "the limit is 1000"},
		{"MapOfMultiSelects", "map(&[@,@,@,@], map(&[@,@,@,@], map(&[@,@,@,@], data.tags)))", "the limit is 1000"},
		{"SortByNestedSort", "sort_by(data.files, &to_string(sort_by(data.files, &name)))", "the limit is 1000"},
		{"ToStringOfToString", "to_string(to_string(to_string(data)))", "the limit is 1000"},
		{"JoinWithEventSeparator", "join(type, data.tags)", "join() separator must not depend on the event"},
		{"ExponentialOfLiteral", "`[1]`" + strings.Repeat(".[@,@][]", 22), "whatever the event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(&herald.Filter{JMESPath: tt.expr})
			require.Nil(t, m)
			requireFilterError(t, err, "filter.jmespath", tt.msg)
			require.Contains(t, err.Error(), "expression refused")
		})
	}
}

// TestJMESPathCostAccepted: the filters DSS subscriptions use, and the
// examples of the README, compile; their factors stay far from the limit.
func TestJMESPathCostAccepted(t *testing.T) {
	t.Parallel()

	tests := []struct {
		expr      string
		maxFactor float64
	}{
		{"type == 'bundle.indexed'", 1},
		{"data.files[?size > `1000`].name", 10},
		{"contains(data.tags, 'blue')", 2},
		{"data.matrix[][] | max(@)", 10},
		{"data.files[::-1] | [0].name", 5},
		{"sort_by(data.files, &size)[-1].name", 150},
		{"type == 'bundle.indexed' && data.sample.donor.species == 'Homo sapiens' && length(data.files[?size > `1000000`]) > `0`", 15},
		{"join(', ', data.tags) == 'blue, green'", 10},
		{"to_string(data.size) == '15'", 70},
		{"starts_with(data.sample.organ, 'Br') || ends_with(type, '.deleted')", 5},
		{"data.files[*].{n: name, s: size}[?s > `1`]", 60},
		{"map(&to_string(@), data.tags)", 40},
		{"max_by(data.files, &size).name == 'x'", 10},
		{"length(keys(data)) > `3` && !data.missing", 5},
		{"data.project.contributors[?contains(institution, 'Example')] | length(@) > `0`", 20},
		{"not_null(data.missing, data.size) == `15`", 5},
		{"merge(data.bundle, {x: type}).x == type", 10},
		{jmesExponential(1), 10},
		{jmesExponential(3), 300},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			_, err := Compile(&herald.Filter{JMESPath: tt.expr})
			require.NoError(t, err)
			c := jmesCostOf(t, tt.expr)
			require.LessOrEqual(t, c.work.factor(), tt.maxFactor)
		})
	}
}

// TestJMESPathCostShape: the bound of the expression grows
// geometrically with n, so a short expression is refused long before its
// work is noticeable; the bound of a projection follows the part of the
// event it reads, not the whole event.
func TestJMESPathCostShape(t *testing.T) {
	t.Parallel()

	prev := jmesCostOf(t, jmesExponential(0)).work.factor()
	for n := 1; n <= 22; n++ {
		f := jmesCostOf(t, jmesExponential(n)).work.factor()
		require.GreaterOrEqual(t, f, min(2*prev, jmesBoundCap), "n=%d", n)
		prev = f
	}

	c := jmesCostOf(t, "data.files[?size > `1000`].name")
	require.Len(t, c.paths, 1)
	require.Equal(t, []jmesStep{{name: "data"}, {name: "files"}}, c.paths[0].steps)
	require.Zero(t, c.work.a, "no term in the size of the whole envelope")

	// A large part of the event the expression does not read costs it
	// nothing.
	big := &herald.Event{Type: "t", Data: json.RawMessage(`{"files": [{"size": 2000, "name": "a"}], "blob": "` + strings.Repeat("x", 4*JMESPathCostLimit) + `"}`)}
	m, err := Compile(&herald.Filter{JMESPath: "data.files[?size > `1000`].name"})
	require.NoError(t, err)
	require.True(t, m.Match(NewInput(big)))
}

// TestJMESPathCostLimit: an accepted expression whose bound on an event
// exceeds JMESPathCostLimit is not evaluated: no match, counted.
func TestJMESPathCostLimit(t *testing.T) {
	t.Parallel()

	expr := jmesExponential(3) + " | length(@) > `0`"
	m, err := Compile(&herald.Filter{JMESPath: expr})
	require.NoError(t, err)
	require.True(t, m.Match(NewInput(smallEvent())), "runs on a small event")

	c := jmesCostOf(t, expr)
	n := int(JMESPathCostLimit/c.work.factor()) + 1 // bytes of data that exceed the bound
	large := &herald.Event{Type: "t", Data: json.RawMessage(`{"s": "` + strings.Repeat("x", n) + `"}`)}
	in := NewInput(large)
	doc, size := in.jmesDoc()
	require.Greater(t, c.at(size, in.jmesPathSize, JMESPathCostLimit), float64(JMESPathCostLimit))
	out, err := jmespath.Search(expr, doc)
	require.NoError(t, err)
	require.Equal(t, true, out, "the expression itself would match")

	before := CostLimitHits()["jmespath"]
	require.False(t, m.Match(in))
	require.Greater(t, CostLimitHits()["jmespath"], before)
}

// TestJMESPathSortByIsolated: sort_by sorts its list in place; one
// subscription's filter must not reorder the event other filters see.
func TestJMESPathSortByIsolated(t *testing.T) {
	t.Parallel()

	sorter, err := Compile(&herald.Filter{JMESPath: "sort_by(data.files, &name)[0].name == 'reads_R1.fastq.gz'"})
	require.NoError(t, err)
	first, err := Compile(&herald.Filter{JMESPath: "data.files[0].name == 'sample.json'"})
	require.NoError(t, err)
	in := testInput(t)
	require.True(t, first.Match(in))
	require.True(t, sorter.Match(in))
	require.True(t, first.Match(in), "the event's files are in their published order")
}

// TestJMESPathASTKinds checks the mirror of go-jmespath's node types
// (jmesKind) against the names the library prints. ASTEmpty is left out:
// the parser builds it only on a path that then fails to parse.
func TestJMESPathASTKinds(t *testing.T) {
	t.Parallel()

	names := []string{
		jkEmpty: "ASTEmpty", jkComparator: "ASTComparator", jkCurrentNode: "ASTCurrentNode",
		jkExpRef: "ASTExpRef", jkFunctionExpression: "ASTFunctionExpression", jkField: "ASTField",
		jkFilterProjection: "ASTFilterProjection", jkFlatten: "ASTFlatten", jkIdentity: "ASTIdentity",
		jkIndex: "ASTIndex", jkIndexExpression: "ASTIndexExpression", jkKeyValPair: "ASTKeyValPair",
		jkLiteral: "ASTLiteral", jkMultiSelectHash: "ASTMultiSelectHash", jkMultiSelectList: "ASTMultiSelectList",
		jkOrExpression: "ASTOrExpression", jkAndExpression: "ASTAndExpression", jkNotExpression: "ASTNotExpression",
		jkPipe: "ASTPipe", jkProjection: "ASTProjection", jkSubexpression: "ASTSubexpression",
		jkSlice: "ASTSlice", jkValueProjection: "ASTValueProjection",
	}
	require.Len(t, names, int(jkCount))
	seen := map[jmesKind]bool{}
	var preorder func(n *jmesNode, out []string) []string
	preorder = func(n *jmesNode, out []string) []string {
		seen[n.kind] = true
		out = append(out, names[n.kind])
		for i := range n.children {
			out = preorder(&n.children[i], out)
		}
		return out
	}
	astName := regexp.MustCompile(`(?m)^\s*(AST\w+) \{$`)
	for _, expr := range []string{
		"a.b[0] | c[1:2].d[*].e[].f[?g == `1` || !h && @].{k: sort_by(l, &m)}.[n, 'o'] | *.p",
	} {
		ast, err := jmespath.NewParser().Parse(expr)
		require.NoError(t, err)
		var want []string
		for _, m := range astName.FindAllStringSubmatch(ast.String(), -1) {
			want = append(want, m[1])
		}
		n, err := jmesReadNode(reflect.ValueOf(ast))
		require.NoError(t, err)
		require.Equal(t, want, preorder(&n, nil), expr)
	}
	for k := jkComparator; k < jkCount; k++ {
		require.True(t, seen[k], "no sample for %s", names[k])
	}
}

// TestJMESPathLiteralSize: literal sizes read by reflection are the sizes
// of the decoded values.
func TestJMESPathLiteralSize(t *testing.T) {
	t.Parallel()

	for _, lit := range []string{`null`, `true`, `1.5`, `"abc"`, `[1, "ab", [null]]`, `{"ab": {"c": [1, 2]}, "": ""}`} {
		ast, err := jmesParse("`" + lit + "`")
		require.NoError(t, err)
		var v any
		require.NoError(t, json.Unmarshal([]byte(lit), &v))
		require.Equal(t, jmesLiteral(t, ast), jmesValueSize(v), lit)
	}
	ast, err := jmesParse("'raw string'")
	require.NoError(t, err)
	require.Equal(t, float64(1+len("raw string")), jmesLiteral(t, ast))
}

func jmesLiteral(t *testing.T, n jmesNode) float64 {
	t.Helper()
	require.Equal(t, jkLiteral, n.kind)
	return n.litSize
}
