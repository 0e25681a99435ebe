package filter

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// cel-go reports syntax errors in its ANTLR parser's words ("mismatched
// input '<EOF>' expecting {'[', '{', …, IDENTIFIER}"), which name grammar
// tokens rather than the mistake (issue 24). celSyntaxWords rewrites the
// shapes that parser produces into what is wrong and what would fit; any
// other message (type errors, undeclared names) is already in words and
// passes through unchanged.
var (
	celSyntaxPrefix   = "Syntax error: "
	celMismatched     = regexp.MustCompile(`^mismatched input '(.*)' expecting (.*)$`)
	celExtraneous     = regexp.MustCompile(`^extraneous input '(.*)' expecting (.*)$`)
	celMissing        = regexp.MustCompile(`^missing '(.*)' at '(.*)'$`)
	celTokenError     = regexp.MustCompile(`^token recognition error at: '(.*)'$`)
	celNoViable       = regexp.MustCompile(`^no viable alternative at input '(.*)'$`)
	celExpectedTokens = regexp.MustCompile(`'[^']*'|[A-Z_]+`)
)

func celSyntaxWords(msg string) string {
	rest, ok := strings.CutPrefix(msg, celSyntaxPrefix)
	if !ok {
		return msg
	}
	if m := celMismatched.FindStringSubmatch(rest); m != nil {
		return celUnexpected(m[1], m[2])
	}
	if m := celExtraneous.FindStringSubmatch(rest); m != nil {
		return celUnexpected(m[1], m[2])
	}
	if m := celMissing.FindStringSubmatch(rest); m != nil {
		return "syntax error: '" + m[1] + "' is missing before " + celWhere(m[2])
	}
	if m := celTokenError.FindStringSubmatch(rest); m != nil {
		return "syntax error: " + celBadCharacters(m[1])
	}
	if m := celNoViable.FindStringSubmatch(rest); m != nil {
		return "syntax error: the expression cannot continue with " + celWhere(m[1])
	}
	return "syntax error: " + rest
}

// celUnexpected words "found got, expecting want".
func celUnexpected(got, want string) string {
	switch {
	case want == "<EOF>":
		return "syntax error: " + celWhere(got) + " follows a complete expression (join conditions with && or ||, compare with ==)"
	case got == "<EOF>":
		return "syntax error: the expression ends too early; expected " + celExpected(want)
	default:
		return "syntax error: expected " + celExpected(want) + ", found " + celWhere(got)
	}
}

// celWhere names a token as found in the source.
func celWhere(tok string) string {
	if tok == "<EOF>" {
		return "the end of the expression"
	}
	return "'" + tok + "'"
}

// celExpected words the parser's expected-token set ("{']', ','}" or
// one token). A set that admits a literal or a name means a value (an
// operand) was expected.
func celExpected(set string) string {
	toks := celExpectedTokens.FindAllString(set, -1)
	for _, t := range toks {
		if t == "IDENTIFIER" || t == "STRING" || t == "NUM_INT" {
			return "a value (a field such as data.amount, a literal, or an expression in parentheses)"
		}
	}
	if len(toks) == 0 {
		return set
	}
	for i, t := range toks {
		if t == "EOF" {
			toks[i] = "the end of the expression"
		}
	}
	return strings.Join(toks, " or ")
}

// celBadCharacters words characters the lexer could not read.
func celBadCharacters(s string) string {
	t := strings.TrimSpace(s)
	if i := strings.IndexFunc(t, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(t[i:])
		return fmt.Sprintf("a control character (U+%04X) cannot appear in an expression", r)
	}
	switch {
	case t == "=":
		return "'=' is not an operator; compare with =="
	case strings.HasPrefix(t, `"`) || strings.HasPrefix(t, "'"):
		return "a string is not closed: " + t[:1] + " has no matching " + t[:1]
	case t == "":
		return "a character that cannot appear in an expression"
	default:
		return "'" + t + "' cannot appear in an expression"
	}
}
