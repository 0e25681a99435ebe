package httpapi

import (
	"io"
	"net/http"
	"time"
)

// DefaultReadTimeout is how long a request's headers, and then its body,
// may take to arrive (herald serve --read-timeout): 10 s lets a 16 MiB
// batch arrive at 1.6 MB/s, and holds a client that trickles its body
// for 10 s instead of for ever.
const DefaultReadTimeout = 10 * time.Second

// ReadDeadline gives every request's body d to arrive, counted from the
// moment the handler starts (after the headers, which http.Server's
// ReadHeaderTimeout bounds): a body still arriving then fails its read,
// and the API answers 408 request_timeout. http.Server's ReadTimeout
// cannot do this on a server that also serves WebSocket sessions (it
// would end them); the push upgrade lifts the deadline instead (push's
// Server clears it before upgrading). d ≤ 0 sets no deadline.
//
// The deadline is lifted again once the body has been read to its end,
// and a request without a body gets none: net/http reads the connection
// in the background while a handler runs (to notice a client that went
// away), and a deadline passing under that read would cancel the
// request's context in the middle of its work.
func ReadDeadline(next http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		// An error means the writer cannot set deadlines (a test
		// recorder); nothing to bound then.
		if rc.SetReadDeadline(time.Now().Add(d)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline when the body has been read to
// its end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
