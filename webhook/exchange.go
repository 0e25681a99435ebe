package webhook

import (
	"context"
	"net/http"
	"time"

	"github.com/heraldhq/herald"
)

// Do sends req, a request another destination type built (a Web Push
// message), through the Sender's guarded client: the same SSRF Guard,
// connection pool, no proxy and no redirects as a webhook. timeout bounds
// the whole exchange as Request.Timeout does (<= 0: herald.DefaultTimeout,
// capped at herald.MaxTimeout).
//
// The Result has Status, Excerpt (the start of the body, read up to
// herald.ResponseReadLimit), Duration, RetryAfter for a 429 or 503, and
// Success for a 2xx. A transport failure (refused, timeout, TLS, DNS, the
// Guard) is classified as for a webhook. Any other status leaves Class
// empty: the caller classifies it. header is the answer's headers (nil
// when none arrived).
func (s *Sender) Do(ctx context.Context, req *http.Request, timeout time.Duration) (res Result, header http.Header) {
	start := time.Now()
	defer func() {
		res.Duration = time.Since(start)
		res.Message = herald.CleanLine(res.Message, maxMessageLen)
	}()
	if timeout <= 0 {
		timeout = herald.DefaultTimeout
	}
	timeout = min(timeout, herald.MaxTimeout)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	defer cancel()
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", s.userAgent)
	}
	resp, err := s.client.Do(req.WithContext(ctx)) //nolint:gosec // G704: the URL is the subscriber's by design; the Guard checks every address dialled
	if err != nil {
		return errorResult(ctx, err, timeout), nil
	}
	defer resp.Body.Close()
	res = Result{Status: resp.StatusCode}
	excerpt, err := readBody(resp.Body)
	res.Excerpt = excerpt
	if err != nil {
		fail := errorResult(ctx, err, timeout)
		fail.Status, fail.Excerpt = res.Status, res.Excerpt
		return fail, resp.Header
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		res.Success = true
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return res, resp.Header
}

// StatusText is "503 Service Unavailable", or "599" for a code without a
// name: how a Result's Message names a status.
func StatusText(code int) string { return statusText(code) }
