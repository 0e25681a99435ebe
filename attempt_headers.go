package herald

import (
	"slices"
	"strings"
)

// Bounds on the headers an attempt keeps, per side (request and response):
// at most 32 headers, each value cut to 512 bytes, names and values together
// at most 8 KiB. Names are taken in sorted order until a bound is reached, so
// the same headers always keep the same subset. A header name longer than a
// value may be is dropped whole. These bounds keep an attempt row small: a
// receiver may answer with up to 64 KiB of headers.
const (
	AttemptHeadersMax      = 32
	AttemptHeaderValueMax  = 512
	AttemptHeadersBytesMax = 8 << 10
)

// MaskedCredential stands in for a credential a reader may not see: the
// value of a credential-bearing header in a stored attempt, or in a
// subscription shown to a reader without subscriptions:write.
const MaskedCredential = "***"

// signatureHeader is the Standard Webhooks signature header (the webhook
// package's HeaderSignature; repeated here, the root package imports none).
const signatureHeader = "webhook-signature"

// credentialWords mark a header name as carrying a credential when the
// lower-cased name contains one of them (Authorization, X-Api-Key, Cookie,
// Set-Cookie, X-Auth-Token, X-Webhook-Secret, webhook-signature…).
// Guessing wide costs a reader a harmless value now and then; guessing
// narrow would leak a key. This is THE rule: the API masks subscription
// headers with it, and attempts store their headers redacted by it.
var credentialWords = []string{"auth", "token", "secret", "key", "password", "passwd", "cookie", "session", "credential", "signature"}

// credentialsByFirst is credentialWords by first byte, so one pass over a
// name finds them (ten searches of every name were a third of an
// attempt's header bookkeeping).
var credentialsByFirst = func() (by [256][]string) {
	for _, w := range credentialWords {
		by[w[0]] = append(by[w[0]], w)
	}
	return by
}()

// CredentialHeader reports whether a header's value is a credential.
func CredentialHeader(name string) bool {
	return credentialLower(strings.ToLower(name))
}

// credentialLower is CredentialHeader of a lower-cased name.
func credentialLower(n string) bool {
	for i := 0; i < len(n); i++ {
		for _, w := range credentialsByFirst[n[i]] {
			if strings.HasPrefix(n[i:], w) {
				return true
			}
		}
	}
	return false
}

// RedactHeader returns the value of header name as an attempt stores it:
// a credential's value is MaskedCredential, except webhook-signature's,
// whose schemes are kept ("v1,abc v1,def" becomes "v1,*** v1,***") so a
// reader sees how many secrets signed and with what. Redacting twice gives
// the same value.
func RedactHeader(name, value string) string {
	if value == "" || !CredentialHeader(name) {
		return value
	}
	return redactCredential(name, value)
}

// redactCredential is RedactHeader of a credential's value.
func redactCredential(name, value string) string {
	if !strings.EqualFold(name, signatureHeader) {
		return MaskedCredential
	}
	sigs := strings.Fields(value)
	for i, s := range sigs {
		scheme, _, ok := strings.Cut(s, ",")
		if !ok || len(scheme) > 8 {
			scheme = "?"
		}
		sigs[i] = scheme + "," + MaskedCredential
	}
	return strings.Join(sigs, " ")
}

// AttemptHeaders returns the headers an attempt keeps of h (an http.Header,
// or any map of header lines): several values of one name are joined with
// ", ", then BoundHeaders applies. A nil h gives nil.
func AttemptHeaders(h map[string][]string) map[string]string {
	if h == nil {
		return nil
	}
	entries := make([]boundEntry, 0, len(h))
	for name, vs := range h {
		entries = append(entries, boundEntry{name: name, value: strings.Join(vs, ", ")})
	}
	return boundEntries(entries)
}

// BoundHeaders returns h as an attempt stores it: names lower-cased,
// credentials redacted (RedactHeader), names and values cleaned to one line
// of valid UTF-8 (CleanLine) and the whole cut to the bounds above. A nil h
// gives nil, an empty one an empty map (headers recorded, none sent).
// Applying it twice gives the same map, so the stores apply it again on
// write and nothing unbounded or unredacted is stored whoever wrote it.
func BoundHeaders(h map[string]string) map[string]string {
	if h == nil {
		return nil
	}
	if boundAlready(h) {
		// The common case on write: the Sender bounded them already.
		// Checking is cheaper than copying (an attempt's completion is on
		// every delivery's path).
		return h
	}
	entries := make([]boundEntry, 0, len(h))
	for name, v := range h {
		entries = append(entries, boundEntry{name: name, value: v})
	}
	return boundEntries(entries)
}

// boundEntry is one header line on its way through boundEntries.
type boundEntry struct {
	key         string // the lower-cased name, the sort key
	name, value string
}

// boundEntries is BoundHeaders over header lines. Each name is lower-cased
// once, not in every comparison of the sort: this runs twice on every
// attempt (request and response), and lower-casing in the comparison was
// most of its cost (docs/benchmarks.md, BenchmarkAttemptHeaders).
func boundEntries(entries []boundEntry) map[string]string {
	for i := range entries {
		entries[i].key = strings.ToLower(entries[i].name)
	}
	// By lower-cased name, then by spelling, so two spellings of one name
	// always resolve the same way.
	slices.SortFunc(entries, func(a, b boundEntry) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	out := make(map[string]string, min(len(entries), AttemptHeadersMax))
	total := 0
	for _, e := range entries {
		if len(out) == AttemptHeadersMax {
			break
		}
		n := e.key
		if !isCleanLine(e.name) {
			n = strings.ToLower(CleanLine(e.name, 0))
		}
		if n == "" || len(n) > AttemptHeaderValueMax {
			continue
		}
		if _, dup := out[n]; dup {
			continue // two spellings of one name: the first sorted wins
		}
		v := e.value
		if v != "" && credentialLower(n) {
			v = redactCredential(n, v)
		}
		if len(v) > AttemptHeaderValueMax || !isCleanLine(v) {
			v = CleanLine(v, AttemptHeaderValueMax)
		}
		if total+len(n)+len(v) > AttemptHeadersBytesMax {
			continue
		}
		total += len(n) + len(v)
		out[n] = v
	}
	return out
}

// boundAlready reports whether BoundHeaders would return h unchanged.
func boundAlready(h map[string]string) bool {
	if len(h) > AttemptHeadersMax {
		return false
	}
	total := 0
	for n, v := range h {
		total += len(n) + len(v)
		if n == "" || len(n) > AttemptHeaderValueMax || len(v) > AttemptHeaderValueMax || total > AttemptHeadersBytesMax ||
			!isCleanLine(n) || !isCleanLine(v) || hasUpper(n) || v != "" && credentialLower(n) && redactCredential(n, v) != v {
			return false
		}
	}
	return true
}

// isCleanLine reports whether CleanLine would leave s (unbounded) as it is:
// one pass over printable ASCII, the usual header; anything else is
// checked in full.
func isCleanLine(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f {
			return IsCleanText(s) && !strings.ContainsAny(s, "\t\n\r")
		}
	}
	return true
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return true // non-ASCII: let strings.ToLower decide
		}
	}
	return false
}
