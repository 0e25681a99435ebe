package herald

import "path"

// MatchEventType reports whether typ matches any of patterns; no patterns
// match everything. Patterns are globs where '*' matches any run of
// characters including dots ("bundle.*" matches "bundle.indexed" and
// "bundle.a.b"), '?' one character.
func MatchEventType(patterns []string, typ string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if globMatch(p, typ) {
			return true
		}
	}
	return false
}

// ValidEventTypePattern reports whether p is a usable pattern.
func ValidEventTypePattern(p string) bool {
	if p == "" || len(p) > 256 {
		return false
	}
	_, err := path.Match(p, "")
	return err == nil
}

func globMatch(p, s string) bool {
	// Iterative '*'/'?' matcher; '*' crosses dots, unlike path.Match's '/'.
	px, sx := 0, 0
	starP, starS := -1, 0
	for sx < len(s) {
		switch {
		case px < len(p) && (p[px] == '?' || (p[px] != '*' && p[px] == s[sx])):
			px++
			sx++
		case px < len(p) && p[px] == '*':
			starP, starS = px, sx
			px++
		case starP >= 0:
			starS++
			px, sx = starP+1, starS
		default:
			return false
		}
	}
	for px < len(p) && p[px] == '*' {
		px++
	}
	return px == len(p)
}
