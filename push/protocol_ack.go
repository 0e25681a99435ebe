package push

// The ack is the frame a user agent sends for every message, so it is
// decoded without encoding/json when it has the plain shape every client
// sends: {"messageType":"ack","updates":[{"channelID":"…","version":"…",
// "code":N}, …]}, in any key order and JSON whitespace, strings of
// printable ASCII without escapes, codes as plain integers. Anything else
// (other keys, escapes, nulls, a duplicate key, non-ASCII) returns !ok and
// goes through encoding/json as before, so the fast path only ever answers
// what the general one would: FuzzDecodeClientMessage compares the two on
// every input the fast path takes. The two json.Unmarshal passes of an ack
// were a tenth of a send's CPU (issue 25).

type wireAckUpdate struct {
	channelID, version string
	code               int
}

// decodeAckFast reads data as a plain ack; ok false means "not that
// shape", not "invalid".
func decodeAckFast(data []byte) (updates []wireAckUpdate, ok bool) {
	p := ackParser{b: data}
	p.ws()
	if !p.byte('{') {
		return nil, false
	}
	var sawType, sawUpdates bool
	for {
		p.ws()
		key, ok := p.raw()
		if !ok {
			return nil, false
		}
		p.ws()
		if !p.byte(':') {
			return nil, false
		}
		p.ws()
		switch string(key) {
		case "messageType":
			v, ok := p.raw()
			if sawType || !ok || string(v) != msgAck {
				return nil, false
			}
			sawType = true
		case "updates":
			if sawUpdates {
				return nil, false
			}
			if updates, ok = p.updates(); !ok {
				return nil, false
			}
			sawUpdates = true
		default:
			return nil, false
		}
		p.ws()
		if p.byte(',') {
			continue
		}
		if !p.byte('}') {
			return nil, false
		}
		break
	}
	p.ws()
	if !sawType || !sawUpdates || p.i != len(p.b) {
		return nil, false
	}
	if updates == nil {
		updates = []wireAckUpdate{}
	}
	return updates, true
}

type ackParser struct {
	b []byte
	i int
}

func (p *ackParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *ackParser) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// raw reads a string of printable ASCII with no escape, as the bytes
// between its quotes (keys are compared as they are, not copied).
func (p *ackParser) raw() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// str is raw as a string of its own.
func (p *ackParser) str() (string, bool) {
	b, ok := p.raw()
	return string(b), ok
}

// int reads -?(0|[1-9][0-9]*) of at most 18 digits (no overflow), not
// followed by a fraction or exponent.
func (p *ackParser) int() (int, bool) {
	neg := p.byte('-')
	start := p.i
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		n = n*10 + int(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

func (p *ackParser) updates() ([]wireAckUpdate, bool) {
	if !p.byte('[') {
		return nil, false
	}
	var out []wireAckUpdate
	p.ws()
	if p.byte(']') {
		return []wireAckUpdate{}, true
	}
	for {
		p.ws()
		u, ok := p.update()
		if !ok {
			return nil, false
		}
		out = append(out, u)
		p.ws()
		if p.byte(',') {
			continue
		}
		if !p.byte(']') {
			return nil, false
		}
		return out, true
	}
}

func (p *ackParser) update() (wireAckUpdate, bool) {
	var u wireAckUpdate
	if !p.byte('{') {
		return u, false
	}
	p.ws()
	if p.byte('}') {
		return u, true
	}
	var seen [3]bool
	for {
		p.ws()
		key, ok := p.raw()
		if !ok {
			return u, false
		}
		p.ws()
		if !p.byte(':') {
			return u, false
		}
		p.ws()
		var f int
		switch string(key) {
		case "channelID":
			f = 0
			u.channelID, ok = p.str()
		case "version":
			f = 1
			u.version, ok = p.str()
		case "code":
			f = 2
			u.code, ok = p.int()
		default:
			return u, false
		}
		if !ok || seen[f] {
			return u, false
		}
		seen[f] = true
		p.ws()
		if p.byte(',') {
			continue
		}
		if !p.byte('}') {
			return u, false
		}
		return u, true
	}
}
