package httpapi

// validJSON reports whether b is one valid JSON value, exactly as
// json.Valid does (FuzzValidJSON holds it to that): the same grammar, the
// same whitespace, any bytes from 0x20 up inside strings (json.Valid does
// not check UTF-8; parseBody does, separately), and the same nesting limit.
//
// It exists because json.Valid was half of a publish's decoding: its
// scanner calls a state function per byte, 4 µs for a 1 KiB event in the
// node's profile. This is one loop, and strings, most of an event, go
// through a table lookup per byte.
func validJSON(b []byte) bool {
	var buf [32]byte
	stack := buf[:0] // the open containers: '{' or '['
	i := 0
	var ok bool
	for {
		// A value starts at i, after whitespace.
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{', '[':
			if len(stack) >= maxJSONDepth {
				return false
			}
			j := skipSpace(b, i+1)
			if j < len(b) && b[j] == c+2 { // '}' is '{'+2, ']' is '['+2
				i = j + 1
				break // an empty container is a whole value
			}
			stack = append(stack, c)
			i = j
			if c == '{' {
				if i, ok = objectKey(b, i); !ok {
					return false
				}
			}
			continue // the container's first value
		case '"':
			if i, ok = scanString(b, i); !ok {
				return false
			}
		case 't':
			if !literalAt(b, i, "true") {
				return false
			}
			i += 4
		case 'f':
			if !literalAt(b, i, "false") {
				return false
			}
			i += 5
		case 'n':
			if !literalAt(b, i, "null") {
				return false
			}
			i += 4
		default:
			if i, ok = scanNumber(b, i); !ok {
				return false
			}
		}
		// A value ended at i: close containers, or go on after a comma.
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			if b[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return false
			}
			i++
			if top == '{' {
				if i, ok = objectKey(b, skipSpace(b, i)); !ok {
					return false
				}
			}
			break
		}
	}
}

// maxJSONDepth is encoding/json's nesting limit: 10,000 open containers
// are valid, one more is not.
const maxJSONDepth = 10000

func literalAt(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// objectKey reads `"key" :` at i and returns the index after the colon.
func objectKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, ok := scanString(b, i)
	if !ok {
		return i, false
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return i + 1, true
}

// plainInString marks the bytes a string holds as they are: not a quote,
// not a backslash, not a control character.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString reads the string starting with the quote at i and returns
// the index after its closing quote.
func scanString(b []byte, i int) (int, bool) {
	i++
	for i < len(b) {
		c := b[i]
		if plainInString[c] {
			i++
			continue
		}
		switch c {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i and
// returns the index after it. What follows is the caller's to check.
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i, true
}
