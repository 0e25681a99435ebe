package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testdb"
)

// sizeProbe is a body that has sent only data, and records the size of
// every buffer it was asked to fill.
type sizeProbe struct {
	data    []byte
	largest int
}

func (p *sizeProbe) Read(b []byte) (int, error) {
	p.largest = max(p.largest, len(b))
	if len(p.data) == 0 {
		return 0, io.ErrUnexpectedEOF // the client stopped sending
	}
	n := copy(b, p.data)
	p.data = p.data[n:]
	return n, nil
}

// A body announcing 1 MiB that sent one byte is read into a buffer of at
// most preallocBodyBytes (64 KiB), not the 1 MiB announced.
func TestReadAnnouncedAllocatesAsDataArrives(t *testing.T) {
	t.Parallel()
	p := &sizeProbe{data: []byte("{")}
	_, err := readAnnounced(p, 1<<20)
	require.Error(t, err)
	require.LessOrEqual(t, p.largest, preallocBodyBytes)

	// Bodies that do arrive are read whole, through every growth step.
	for _, n := range []int{1, 1000, preallocBodyBytes, preallocBodyBytes + 1, 3*preallocBodyBytes + 7, 1 << 20} {
		body := bytes.Repeat([]byte("abcdefg"), n/7+1)[:n]
		got, err := readAnnounced(iotestHalfReader{bytes.NewReader(body)}, int64(n))
		require.NoError(t, err, n)
		require.Equal(t, body, got, n)
		require.Equal(t, n, cap(got), "%d: a body is held in a buffer of its size", n)
	}
	// A body shorter than announced is an error.
	_, err = readAnnounced(strings.NewReader("ab"), 3)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// iotestHalfReader returns at most half of the buffer asked for, as a
// socket does when data arrives in pieces.
type iotestHalfReader struct{ r io.Reader }

func (h iotestHalfReader) Read(b []byte) (int, error) {
	return h.r.Read(b[:(len(b)+1)/2])
}

// The publish path still reads an ordinary event in one allocation.
func TestReadAnnouncedOneAllocation(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 4096)
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		if _, err := readAnnounced(r, int64(len(body))); err != nil {
			t.Fatal(err)
		}
	})
	require.Equal(t, 1.0, allocs)
}

// Routes whose bodies are small by nature answer 413 body_too_large over
// their own limits, far below --max-body-bytes.
func TestSmallRouteBodyLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, testdb.SQLite(t))
	sub := b.createSub(t, obj{})
	for _, tc := range []struct {
		method, path string
		limit        int
		anonymous    bool
	}{
		{http.MethodPost, "/v1/portal/sessions", PortalSessionBodyBytes, true},
		{http.MethodPost, "/v1/tokens", SmallBodyBytes, false},
		{http.MethodPost, "/v1/subscriptions/" + sub.ID + "/secret/rotate", SmallBodyBytes, false},
		{http.MethodPost, "/v1/dead-letters/redrive", SmallBodyBytes, false},
		{http.MethodPost, "/v1/tenants/acme/portal", PortalBodyBytes, false},
	} {
		body := bodyOfSize(tc.limit+1, `{"x": "`, `"}`)
		var opts []reqOption
		if tc.anonymous {
			opts = append(opts, withoutToken())
		}
		requireError(t, b.do(t, tc.method, tc.path, body, opts...), http.StatusRequestEntityTooLarge, herald.CodeBodyTooLarge, "")
		// At the limit the body is read and judged (here: an unknown field).
		res := b.do(t, tc.method, tc.path, bodyOfSize(tc.limit, `{"x": "`, `"}`), opts...)
		require.NotEqual(t, http.StatusRequestEntityTooLarge, res.code, "%s %s: %s", tc.method, tc.path, res.body)
	}
	// Events keep --max-body-bytes.
	b.publish(t, obj{"type": "a", "data": strings.Repeat("x", 100<<10)})
}

// A body that trickles in is cut at the read deadline with 408
// request_timeout, on authenticated and anonymous routes alike.
func TestTrickledBodyIsCut(t *testing.T) {
	t.Parallel()
	b := setup(t, testdb.SQLite(t))
	const deadline = 300 * time.Millisecond
	srv := httptest.NewServer(ReadDeadline(b.handler, deadline))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/v1/events", "/v1/portal/sessions"} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		start := time.Now()
		_, err = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer "+testToken+
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, path)
		elapsed := time.Since(start)
		var e errorBody
		require.NoError(t, json.NewDecoder(res.Body).Decode(&e))
		_ = res.Body.Close()
		require.Equal(t, http.StatusRequestTimeout, res.StatusCode, path)
		require.Equal(t, herald.CodeRequestTimeout, e.Error.Code, path)
		require.GreaterOrEqual(t, elapsed, deadline, path)
		require.Less(t, elapsed, 5*time.Second, path)
	}
}

// A request whose body arrived in time (or that has none) keeps its
// context past the read deadline: the deadline bounds the body, not the
// work (net/http's background read must not time out under a handler).
func TestReadDeadlineLiftedAfterBody(t *testing.T) {
	t.Parallel()
	const deadline = 100 * time.Millisecond
	srv := httptest.NewServer(ReadDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			w.WriteHeader(http.StatusGone) // cancelled under the handler
		case <-time.After(5 * deadline):
			w.WriteHeader(http.StatusOK)
		}
	}), deadline))
	t.Cleanup(srv.Close)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"a": 1}`)
		}
		req, err := http.NewRequest(method, srv.URL, body)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, method)
	}
}
