package webhook

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// connServer is a loopback server that counts the connections it accepted
// and reports each one closed.
type connServer struct {
	*httptest.Server
	mu     sync.Mutex
	opened int
	closed chan struct{}
}

func setupConnServer(t *testing.T, handler http.HandlerFunc) *connServer {
	t.Helper()
	cs := &connServer{closed: make(chan struct{}, 64)}
	cs.Server = httptest.NewUnstartedServer(handler)
	cs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			cs.mu.Lock()
			cs.opened++
			cs.mu.Unlock()
		case http.StateClosed, http.StateHijacked:
			cs.closed <- struct{}{}
		}
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

// waitClosed waits until the server saw one of its connections close.
func (cs *connServer) waitClosed(t *testing.T, why string) {
	t.Helper()
	select {
	case <-cs.closed:
	case <-time.After(10 * time.Second):
		t.Fatal(why)
	}
}

func (cs *connServer) connections() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.opened
}

func directSender(t *testing.T) *Sender {
	t.Helper()
	s := NewSender(Config{Guard: &Guard{AllowLoopback: true}})
	t.Cleanup(s.Close)
	require.NotNil(t, s.direct, "plain http takes the direct path by default")
	return s
}

func TestDirectReusesConnections(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"no content", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }},
		{"content length", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }},
		{"chunked", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, " second")
		}},
		{"interim 103 first", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = io.WriteString(w, "final")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := setupConnServer(t, tc.handler)
			s := directSender(t)
			for range 10 {
				res := s.Send(context.Background(), testRequest(srv.URL))
				require.True(t, res.Success, res.Message)
				require.NotEqual(t, http.StatusEarlyHints, res.Status)
			}
			require.Equal(t, 1, srv.connections(), "ten sequential attempts share one connection")
		})
	}
}

func TestDirectNotReused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"connection close", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusOK)
		}},
		{"body past the read limit", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(make([]byte, herald.ResponseReadLimit+1))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := setupConnServer(t, tc.handler)
			s := directSender(t)
			for range 3 {
				res := s.Send(context.Background(), testRequest(srv.URL))
				require.True(t, res.Success, res.Message)
			}
			require.Equal(t, 3, srv.connections())
		})
	}
}

// A kept-alive connection the receiver closed while it sat in the pool
// (its keep-alive timeout, a restart) is noticed before use: the attempt
// goes out on a new connection instead of failing.
func TestDirectStaleIdleConnection(t *testing.T) {
	t.Parallel()
	srv := setupConnServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s := directSender(t)
	require.True(t, s.Send(context.Background(), testRequest(srv.URL)).Success)

	srv.CloseClientConnections()
	srv.waitClosed(t, "the server did not close the connection")
	res := s.Send(context.Background(), testRequest(srv.URL))
	require.True(t, res.Success, res.Message)
	require.Equal(t, 2, srv.connections())
}

// rawServer accepts connections and runs serve on each.
func rawServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// readRequest consumes one request from br; false when none came.
func readRequest(br *bufio.Reader) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, req.Body)
	return true
}

// A receiver that sends bytes nobody asked for on an idle connection broke
// the protocol: the connection is dropped, not read as the next answer.
func TestDirectUnsolicitedBytesNotReused(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conns := 0
	// written is signalled once the unsolicited bytes are sent: no client
	// can see bytes that have not arrived, so the next request waits for
	// them (without it the test raced the receiver's goroutine).
	written := make(chan struct{}, 3)
	url := rawServer(t, func(c net.Conn) {
		mu.Lock()
		conns++
		mu.Unlock()
		br := bufio.NewReader(c)
		for readRequest(br) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			_, _ = io.WriteString(c, "HTTP/1.1 500 Injected\r\nContent-Length: 0\r\n\r\n")
			written <- struct{}{}
		}
	})
	s := directSender(t)
	for range 3 {
		res := s.Send(context.Background(), testRequest(url))
		require.True(t, res.Success, "%d %s", res.Status, res.Message)
		select {
		case <-written:
		case <-time.After(10 * time.Second):
			t.Fatal("the receiver did not write its unsolicited answer")
		}
		// Written is not yet received: the loopback can defer delivery to
		// a softirq. Wait until a pooled connection shows the bytes (or
		// none was pooled, the bytes having come with the answer).
		require.Eventually(t, func() bool {
			s.direct.mu.Lock()
			defer s.direct.mu.Unlock()
			for _, list := range s.direct.idle {
				for _, c := range list {
					if alive(c.nc) {
						return false
					}
				}
			}
			return true
		}, 10*time.Second, time.Millisecond, "the unsolicited bytes did not arrive")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 3, conns)
}

func TestDirectResponseHeadersCapped(t *testing.T) {
	t.Parallel()
	url := rawServer(t, func(c net.Conn) {
		if !readRequest(bufio.NewReader(c)) {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
		for range maxResponseHeaderBytes/len(line) + 8 {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
		_, _ = io.WriteString(c, "\r\n")
	})
	s := directSender(t)
	res := s.Send(context.Background(), testRequest(url))
	require.False(t, res.Success)
	require.Equal(t, herald.ErrorConnection, res.Class)
	require.Contains(t, res.Message, "headers exceeded")
	requireStorable(t, res)
}

func TestDirectIdleConnectionsSwept(t *testing.T) {
	t.Parallel()
	srv := setupConnServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s := directSender(t)
	s.direct.idleTimeout = 20 * time.Millisecond
	require.True(t, s.Send(context.Background(), testRequest(srv.URL)).Success)
	srv.waitClosed(t, "the idle connection was not closed")
	s.direct.mu.Lock()
	defer s.direct.mu.Unlock()
	require.Empty(t, s.direct.idle)
}

func TestDirectCloseDropsIdle(t *testing.T) {
	t.Parallel()
	srv := setupConnServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s := directSender(t)
	require.True(t, s.Send(context.Background(), testRequest(srv.URL)).Success)
	s.Close()
	srv.waitClosed(t, "Close left the idle connection open")
	require.True(t, s.Send(context.Background(), testRequest(srv.URL)).Success, "the Sender stays usable")
}

// The Transport path (Config.StdTransport, and every https URL) gives the
// same results as the direct one.
func TestSendBothPaths(t *testing.T) {
	t.Parallel()
	for _, std := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "transport"}[std], func(t *testing.T) {
			t.Parallel()
			auth := make(chan string, 8)
			srv := setupConnServer(t, func(w http.ResponseWriter, r *http.Request) {
				auth <- r.Header.Get("Authorization")
				switch r.URL.Path {
				case "/busy":
					w.Header().Set("Retry-After", "7")
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = io.WriteString(w, "later")
				case "/moved":
					http.Redirect(w, r, "/elsewhere", http.StatusFound)
				default:
					_, _ = io.WriteString(w, "thanks")
				}
			})
			s := NewSender(Config{Guard: &Guard{AllowLoopback: true}, StdTransport: std})
			t.Cleanup(s.Close)
			require.Equal(t, std, s.direct == nil)

			res := s.Send(context.Background(), testRequest(srv.URL+"/ok"))
			require.True(t, res.Success, res.Message)
			require.Equal(t, "thanks", res.Excerpt)
			require.Empty(t, <-auth)

			res = s.Send(context.Background(), testRequest(srv.URL+"/busy"))
			require.False(t, res.Success)
			require.Equal(t, http.StatusServiceUnavailable, res.Status)
			require.Equal(t, 7*time.Second, res.RetryAfter)
			require.Equal(t, "later", res.Excerpt)
			<-auth

			// Credentials in the URL are sent as Basic auth.
			withUser := strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1)
			res = s.Send(context.Background(), testRequest(withUser+"/ok"))
			require.True(t, res.Success, res.Message)
			require.Equal(t, "Basic b3BzOnMzY3JldA==", <-auth)

			res = s.Send(context.Background(), testRequest(srv.URL+"/moved"))
			require.False(t, res.Success)
			require.Equal(t, http.StatusFound, res.Status)
			require.Contains(t, res.Message, "redirects are not followed")
			require.Equal(t, 1, srv.connections())
		})
	}
}

func TestDirectTooManyInterimResponses(t *testing.T) {
	t.Parallel()
	for _, n := range []int{max1xx, max1xx + 1} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			url := rawServer(t, func(c net.Conn) {
				if !readRequest(bufio.NewReader(c)) {
					return
				}
				for range n {
					_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
				}
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			})
			res := directSender(t).Send(context.Background(), testRequest(url))
			if n <= max1xx {
				require.True(t, res.Success, res.Message)
				require.Equal(t, "ok", res.Excerpt)
				return
			}
			require.False(t, res.Success)
			require.Equal(t, herald.ErrorConnection, res.Class)
			require.Contains(t, res.Message, "interim")
		})
	}
}

// brokenConn fails every write at once, as a pooled connection the
// receiver reset does once the kernel knows.
type brokenConn struct{ net.Conn }

func (brokenConn) Write([]byte) (int, error)       { return 0, syscall.EPIPE }
func (brokenConn) Close() error                    { return nil }
func (brokenConn) SetDeadline(time.Time) error     { return nil }
func (brokenConn) SetReadDeadline(time.Time) error { return nil }

// A reused connection that takes no byte of the request is replaced once,
// with the body sent whole: nothing reached the receiver, so the retry
// cannot duplicate the delivery.
func TestDirectRetriesWhenNothingWritten(t *testing.T) {
	t.Parallel()
	b := setupSender(t, nil)
	s := b.sender
	u, err := neturl.Parse(b.server.URL)
	require.NoError(t, err)
	broken := &directConn{nc: brokenConn{}}
	broken.bw = bufio.NewWriterSize(broken.nc, directBufSize)
	s.direct.put(u.Host, broken)

	req := testRequest(b.server.URL)
	res := s.Send(context.Background(), req)
	require.True(t, res.Success, res.Message)
	got := <-b.requests
	require.Equal(t, req.Body, got.body)
	require.Empty(t, b.requests, "sent once")
}
