package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald"
)

// Defaults and limits of the Sender.
const (
	// DefaultMaxIdleConnsPerHost is Config.MaxIdleConnsPerHost when unset:
	// enough kept-alive connections that a busy subscription does not
	// reconnect (and redo TLS) for every delivery.
	DefaultMaxIdleConnsPerHost = 64
	// DefaultUserAgent is Config.UserAgent when unset.
	DefaultUserAgent = "herald-webhooks/1"
	// maxResponseHeaderBytes caps the response headers herald reads, like
	// ResponseReadLimit caps the body.
	maxResponseHeaderBytes = 64 << 10
	// MaxRetryAfter bounds Result.RetryAfter so a receiver cannot park a
	// delivery for longer than a day.
	MaxRetryAfter = 24 * time.Hour
	// maxMessageLen bounds Result.Message.
	maxMessageLen = 256
)

// Config configures a Sender. The zero value is the production default.
type Config struct {
	// Guard checks every address dialled. nil means &Guard{}: loopback and
	// private ranges are refused.
	Guard *Guard
	// UserAgent is sent with every request (default DefaultUserAgent).
	UserAgent string
	// MaxIdleConnsPerHost is how many kept-alive connections are pooled per
	// destination (default 64).
	MaxIdleConnsPerHost int
	// StdTransport sends plain-http webhooks through net/http's Transport
	// as well, instead of the direct HTTP/1.1 path (ADR 0017). https always
	// goes through the Transport.
	StdTransport bool
}

// Request is one attempt of one delivery.
type Request struct {
	// URL must be http or https.
	URL string
	// Method is POST (the default when empty) or PUT.
	Method string
	// Headers are the subscription's extra headers. Names herald sets
	// itself (content-type, content-length, host, webhook-*, herald-*) and
	// hop-by-hop headers (connection, transfer-encoding, proxy-*, ...) are
	// skipped silently; the API refuses them at create time. user-agent may
	// be overridden. A name or value that is not valid HTTP makes the
	// attempt fail as invalid_request.
	Headers map[string]string
	// Body is sent as is, and signed byte for byte.
	Body []byte
	// MsgID is the webhook-id: the delivery id, the same on every retry so
	// the receiver can drop duplicates.
	MsgID string
	// Secrets are the subscription's active secrets; each signs. At least
	// one is required: herald never sends an unsigned webhook.
	Secrets []string
	// Attempt is the 1-based attempt number sent as herald-attempt.
	Attempt        int
	EventType      string
	SubscriptionID string
	// Timeout bounds the whole exchange, from dialling to reading the capped
	// body. <= 0 means herald.DefaultTimeout; it is capped at
	// herald.MaxTimeout, which leases are sized from.
	Timeout time.Duration
	// Timestamp is signed and sent as webhook-timestamp; zero means now.
	Timestamp time.Time

	// Destination is the subscription's destination (herald.Subscription.Dest).
	// The webhook Sender uses URL and Method above and ignores it; the
	// other destination types (package destination) read their fields
	// from it, and sign and label their messages with the fields below.
	Destination herald.Destination
	// EventID, EventKey and Tenant ("" when untenanted) describe the event.
	EventID  string
	EventKey string
	Tenant   string
}

// Result is the outcome of one attempt.
type Result struct {
	// Success is true for a 2xx answer read completely (up to
	// herald.ResponseReadLimit) within the timeout.
	Success bool
	// Status is the HTTP status, 0 when no answer arrived.
	Status int
	// Class says why the attempt failed; herald.ErrorNone on success.
	Class herald.ErrorClass
	// Message is a short human description of the failure, one line of at
	// most 256 bytes of valid UTF-8 without NUL or other control characters
	// (herald.CleanLine). It never holds secrets, the request URL (it may
	// carry tokens) or the address the Guard refused (internal DNS is not
	// echoed back to API users).
	Message string
	// Excerpt is the start of the response body, at most
	// herald.ResponseExcerptLimit bytes of valid UTF-8 without NUL or
	// control characters other than tab and line breaks
	// (herald.CleanText), so it can be stored in any text column.
	Excerpt  string
	Duration time.Duration
	// RetryAfter is the receiver's Retry-After on 429 and 503, clamped to
	// [0, 24h]; 0 when absent or unparseable.
	RetryAfter time.Duration
	// Permanent says that retrying cannot help (a push service's 413, 400,
	// 401 or 403): the delivery goes to the dead letters at once, whatever
	// tier it is in. A webhook's failures are never permanent (410 Gone is
	// ErrorGone, which also disables the subscription).
	Permanent bool
	// RequestHeaders are the headers sent (a broker destination's message
	// headers), ResponseHeaders those received, as herald.BoundHeaders
	// keeps them (bounded, credentials redacted) for the attempt's record.
	// RequestHeaders is nil when no request was built; ResponseHeaders is
	// nil when no answer arrived.
	RequestHeaders  map[string]string
	ResponseHeaders map[string]string
}

// Sender makes webhook attempts. It is safe for concurrent use; make one per
// process and share it, so connections are pooled.
type Sender struct {
	direct    *directPool // nil with Config.StdTransport
	client    *http.Client
	transport *http.Transport
	userAgent string
}

// NewSender returns a Sender with its own connection pool.
func NewSender(cfg Config) *Sender {
	guard := cfg.Guard
	if guard == nil {
		guard = &Guard{}
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if cfg.MaxIdleConnsPerHost <= 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	dialer := &net.Dialer{
		// The request context bounds each attempt; this only stops a
		// dial from outliving herald.MaxTimeout if a caller passes none.
		Timeout:   herald.MaxTimeout,
		KeepAlive: 30 * time.Second,
		Control:   guard.Control,
	}
	t := &http.Transport{
		// No proxy, deliberately: http.ProxyFromEnvironment would send
		// requests through HTTP(S)_PROXY, and the Guard would then only
		// see the proxy's address, not the destination's.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           0, // no global cap; the per-host cap rules
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// Without Accept-Encoding, receivers answer in plain text, so the
		// excerpt is readable and no decompression work is spent on a
		// body that is mostly discarded.
		DisableCompression: true,
	}
	var direct *directPool
	if !cfg.StdTransport {
		direct = &directPool{dial: dialer.DialContext, maxIdle: cfg.MaxIdleConnsPerHost, idleTimeout: directIdleTimeout}
	}
	return &Sender{
		direct:    direct,
		transport: t,
		userAgent: cfg.UserAgent,
		client: &http.Client{
			Transport: t,
			// Redirects are not followed: a 3xx is a failure (Standard
			// Webhooks), and following one would let a receiver bounce
			// herald to an address of its choosing.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// Close drops the idle pooled connections. The Sender stays usable.
func (s *Sender) Close() {
	s.transport.CloseIdleConnections()
	if s.direct != nil {
		s.direct.closeIdle()
	}
}

// errAttemptTimeout is the cause of the per-attempt context, to tell our own
// timeout from a caller's cancellation.
var errAttemptTimeout = errors.New("attempt timeout")

// Send makes one attempt and classifies its outcome. It never returns an
// error: everything is in the Result.
//
// If ctx is cancelled (not timed out) during the attempt, the Result has
// class herald.ErrorConnection and the message "attempt cancelled"; a caller
// that cancels on shutdown should check ctx.Err() and not count the attempt.
func (s *Sender) Send(ctx context.Context, r *Request) Result {
	start := time.Now()
	res := s.send(ctx, r, start)
	res.Duration = time.Since(start)
	// The message quotes Go error texts, which quote what the receiver
	// sent (a certificate's names, for one): clean it like the excerpt, so
	// it can be stored in any text column.
	res.Message = herald.CleanLine(res.Message, maxMessageLen)
	return res
}

func (s *Sender) send(ctx context.Context, r *Request, start time.Time) Result {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = herald.DefaultTimeout
	}
	timeout = min(timeout, herald.MaxTimeout)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	defer cancel()

	req, res, ok := s.newRequest(ctx, r, start)
	if !ok {
		return res
	}

	var resp *http.Response
	var err error
	if s.direct != nil && req.URL.Scheme == "http" {
		resp, err = s.direct.roundTrip(ctx, req)
	} else {
		resp, err = s.client.Do(req)
	}
	sent := sentHeaders(req)
	if err != nil {
		fail := errorResult(ctx, err, timeout)
		fail.RequestHeaders = sent
		return fail
	}
	defer resp.Body.Close()
	res = Result{Status: resp.StatusCode, RequestHeaders: sent, ResponseHeaders: herald.AttemptHeaders(resp.Header)}

	excerpt, err := readBody(resp.Body)
	res.Excerpt = excerpt
	if err != nil {
		// The status arrived but the body did not, in time or at all: the
		// receiver may have handled it, but herald cannot know, so it is a
		// failure and the webhook-id lets the receiver drop the retry.
		fail := errorResult(ctx, err, timeout)
		fail.Status, fail.Excerpt = res.Status, res.Excerpt
		fail.RequestHeaders, fail.ResponseHeaders = res.RequestHeaders, res.ResponseHeaders
		return fail
	}

	ClassifyStatus(&res, resp.Header)
	return res
}

// ClassifyStatus classifies a complete answer of status res.Status with
// headers h, as a webhook's: 2xx is success; 410 is ErrorGone (the
// subscription is disabled); any other code, 3xx included (redirects are
// not followed), is ErrorHTTPStatus, with the Retry-After of a 429 or
// 503. It sets Success, Class, Message and RetryAfter. The listen
// destination classifies what the local receiver answered with it, so
// both agree.
func ClassifyStatus(res *Result, h http.Header) {
	code := res.Status
	switch {
	case code >= 200 && code <= 299:
		res.Success = true
	case code == http.StatusGone:
		res.Class = herald.ErrorGone
		res.Message = "410 Gone: the endpoint asked for no more deliveries"
	case code >= 300 && code <= 399:
		res.Class = herald.ErrorHTTPStatus
		res.Message = statusText(code) + " (redirects are not followed)"
	default:
		res.Class = herald.ErrorHTTPStatus
		res.Message = statusText(code)
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			res.RetryAfter = parseRetryAfter(h.Get("Retry-After"), time.Now())
		}
	}
}

// newRequest builds the HTTP request, or the invalid_request Result that
// says why it cannot be built.
func (s *Sender) newRequest(ctx context.Context, r *Request, start time.Time) (*http.Request, Result, bool) {
	invalid := func(msg string) (*http.Request, Result, bool) {
		return nil, Result{Class: herald.ErrorInvalidRequest, Message: msg}, false
	}
	method := strings.ToUpper(r.Method)
	switch method {
	case "":
		method = http.MethodPost
	case http.MethodPost, http.MethodPut:
	default:
		return invalid("method must be POST or PUT")
	}
	for name, value := range r.Headers {
		if !validHeaderName(name) {
			return invalid(fmt.Sprintf("invalid header name %q", name))
		}
		if !validHeaderValue(value) {
			return invalid(fmt.Sprintf("invalid value for header %q", name))
		}
	}
	if r.MsgID == "" {
		return invalid("no message id")
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = start
	}
	signed, err := buildHeaders(r, ts, s.userAgent)
	if err != nil {
		return invalid(err.Error())
	}
	// A *bytes.Reader body gives the request its ContentLength and a
	// GetBody, so HTTP/2 can replay it on a refused stream.
	req, err := http.NewRequestWithContext(ctx, method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		// Not echoed: the URL's query may hold a token.
		return invalid("invalid URL")
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return invalid("URL scheme must be http or https")
	}
	if req.URL.Hostname() == "" {
		return invalid("URL has no host")
	}

	req.Header = signed
	return req, Result{}, true
}

// SignedHeaders are the headers of the webhook request r (its extra
// headers, content-type, user-agent, the Standard Webhooks headers signed
// over r.Body at ts, herald-attempt, herald-event-type,
// herald-subscription-id), as the Sender sends them; userAgent applies
// when no extra header overrides it. It fails, with the invalid_request
// Result to record, when r has no message id, a header that is not valid
// HTTP, or cannot be signed. The listen destination hands these to the
// CLI, so what reaches the local receiver is what a webhook would have.
func SignedHeaders(r *Request, ts time.Time, userAgent string) (http.Header, *Result) {
	invalid := func(msg string) (http.Header, *Result) {
		return nil, &Result{Class: herald.ErrorInvalidRequest, Message: msg}
	}
	for name, value := range r.Headers {
		if !validHeaderName(name) {
			return invalid(fmt.Sprintf("invalid header name %q", name))
		}
		if !validHeaderValue(value) {
			return invalid(fmt.Sprintf("invalid value for header %q", name))
		}
	}
	if r.MsgID == "" {
		return invalid("no message id")
	}
	h, err := buildHeaders(r, ts, userAgent)
	if err != nil {
		return invalid(err.Error())
	}
	return h, nil
}

func buildHeaders(r *Request, ts time.Time, userAgent string) (http.Header, error) {
	sig, err := SignatureHeader(r.Secrets, r.MsgID, ts, r.Body)
	if err != nil {
		// err names the secret's index and the problem, never its value.
		return nil, errors.New("cannot sign: " + err.Error())
	}
	h := http.Header{}
	for name, value := range r.Headers {
		if ReservedHeader(name) {
			continue
		}
		h.Set(name, value)
	}
	// Set after the extra headers, so they win even if a reserved name
	// slipped through in a different spelling.
	h.Set("Content-Type", "application/json")
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", userAgent)
	}
	h.Set(HeaderID, r.MsgID)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	h.Set("Herald-Attempt", strconv.Itoa(max(r.Attempt, 1)))
	if r.EventType != "" {
		h.Set("Herald-Event-Type", r.EventType)
	}
	if r.SubscriptionID != "" {
		h.Set("Herald-Subscription-Id", r.SubscriptionID)
	}
	return h, nil
}

// sentHeaders is what the attempt records of req's headers: those set on
// it, and the two net/http writes itself from the request (host,
// content-length, and Authorization from credentials in the URL, which
// http.Client adds to a copy of req; it is redacted anyway).
func sentHeaders(req *http.Request) map[string]string {
	h := make(map[string][]string, len(req.Header)+3)
	for name, vs := range req.Header {
		h[name] = vs
	}
	h["Host"] = []string{req.URL.Host}
	if req.URL.User != nil && req.Header.Get("Authorization") == "" {
		h["Authorization"] = []string{herald.MaskedCredential}
	}
	h["Content-Length"] = []string{strconv.FormatInt(req.ContentLength, 10)}
	return herald.AttemptHeaders(h)
}

// The extra header names herald never sends: its own headers, headers
// net/http computes (host, content-length), and hop-by-hop headers that
// would change how the connection behaves (HTTP/2 refuses most of them
// outright). This is THE list: the API refuses exactly these names when a
// subscription is created or patched (httpapi), and the Sender skips them.
var (
	reservedHeaderNames = []string{
		"content-type", "content-length", "host", "transfer-encoding", "connection",
		"keep-alive", "te", "trailer", "upgrade", "expect",
	}
	reservedHeaderPrefixes = []string{"webhook-", "herald-", "proxy-"}
)

// ReservedHeader reports whether an extra header name (any case) is one
// herald never sends.
func ReservedHeader(name string) bool {
	n := strings.ToLower(name)
	for _, p := range reservedHeaderPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	for _, r := range reservedHeaderNames {
		if n == r {
			return true
		}
	}
	return false
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// validHeaderValue refuses control characters (CR and LF would split the
// header) other than horizontal tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// readBody reads at most herald.ResponseReadLimit bytes and returns the
// excerpt. A longer body is left unread; closing it then drops the
// connection instead of draining it, so an endless body cannot hold a worker.
// A body read to EOF leaves the connection reusable.
func readBody(body io.Reader) (string, error) {
	// The buffer escapes through the io.Reader call, so it is pooled: a
	// fresh one cost every attempt a 1 KiB allocation (issue 13's
	// allocation profile). excerpt copies out of it.
	buf := excerptBufs.Get().(*[herald.ResponseExcerptLimit]byte)
	defer excerptBufs.Put(buf)
	n, err := io.ReadFull(body, buf[:])
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return excerpt(buf[:n], false), nil
	}
	if err != nil {
		return excerpt(buf[:n], true), err
	}
	_, err = io.CopyN(io.Discard, body, herald.ResponseReadLimit-herald.ResponseExcerptLimit)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return excerpt(buf[:n], true), err
}

var excerptBufs = sync.Pool{New: func() any { return new([herald.ResponseExcerptLimit]byte) }}

// excerpt turns raw response bytes into text that is safe to store
// (herald.CleanText: invalid UTF-8 and control characters become U+FFFD)
// of at most herald.ResponseExcerptLimit bytes. When more may follow
// (truncated), an incomplete character at the end is dropped rather than
// replaced: the read limit cut it.
func excerpt(b []byte, truncated bool) string {
	if truncated {
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	return herald.CleanText(string(b), herald.ResponseExcerptLimit)
}

// statusText is "503 Service Unavailable" or "599" for unknown codes.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}

// parseRetryAfter reads a Retry-After value, delay-seconds or HTTP-date
// (RFC 9110 §10.2.3), relative to now, clamped to [0, MaxRetryAfter].
// Anything unparseable is 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0
	}
	return min(max(d, 0), MaxRetryAfter)
}

// errorResult classifies a transport or body-read error. The message is
// built from the innermost useful error, never from *url.Error, whose text
// holds the URL.
func errorResult(ctx context.Context, err error, timeout time.Duration) Result {
	cls, msg := classifyError(ctx, err, timeout)
	return Result{Class: cls, Message: msg}
}

func classifyError(ctx context.Context, err error, timeout time.Duration) (herald.ErrorClass, string) {
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errAttemptTimeout):
			return herald.ErrorTimeout, "no complete response within " + timeout.String()
		case errors.Is(cause, context.DeadlineExceeded):
			return herald.ErrorTimeout, "no complete response before the caller's deadline"
		default:
			return herald.ErrorConnection, "attempt cancelled"
		}
	}
	var fe *ForbiddenError
	if errors.As(err, &fe) {
		return herald.ErrorDestinationForbidden, "destination forbidden: " + fe.Reason + " address"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return herald.ErrorDNS, "DNS lookup of " + dnsErr.Name + " failed: " + dnsErr.Err
	}
	if IsTLSError(err) {
		m := innerMessage(err)
		if !strings.HasPrefix(m, "tls: ") {
			m = "tls: " + m
		}
		return herald.ErrorTLS, m
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return herald.ErrorTimeout, "timed out: " + innerMessage(err)
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return herald.ErrorConnection, "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return herald.ErrorConnection, "connection reset by peer"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return herald.ErrorConnection, "connection closed before a complete response"
	}
	return herald.ErrorConnection, innerMessage(err)
}

// IsTLSError reports handshake and certificate failures, whoever dialled:
// the webhook Sender and the broker destinations (package destination)
// classify them as herald.ErrorTLS through this one function.
func IsTLSError(err error) bool {
	var (
		recErr   tls.RecordHeaderError
		alert    tls.AlertError
		alertPtr *tls.AlertError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	if errors.As(err, &recErr) || errors.As(err, &alert) || errors.As(err, &alertPtr) || errors.As(err, &verify) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return true
	}
	// crypto/tls reports many handshake failures as plain errors whose text
	// starts with "tls: "; broker clients wrap them ("…: tls: …"); net/http
	// says so for plain HTTP on an https URL.
	m := innerMessage(err)
	return strings.HasPrefix(m, "tls: ") || strings.Contains(m, ": tls: ") || strings.Contains(m, "HTTP response to HTTPS client")
}

// innerMessage is err's text without the *url.Error wrapper (method and
// URL).
func innerMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
