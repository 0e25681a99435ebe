package webhook

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/testcert"
)

// requireStorable checks the Result's texts are fit for any text column.
func requireStorable(t *testing.T, res Result) {
	t.Helper()
	for _, s := range []string{res.Message, res.Excerpt} {
		require.True(t, utf8.ValidString(s), "%q", s)
		require.NotContains(t, s, "\x00")
		require.True(t, herald.IsCleanText(s), "%q", s)
	}
	require.NotContains(t, res.Message, "\n")
	require.LessOrEqual(t, len(res.Message), maxMessageLen)
}

// A receiver's certificate names reach the error message through Go's
// x509 error text: NUL and invalid UTF-8 in them must not.
func TestSendTLSErrorWithNULIsClean(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{testcert.NULName(t)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)

	s := NewSender(Config{Guard: &Guard{AllowLoopback: true}})
	res := s.Send(context.Background(), &Request{
		URL: "https://localhost:" + port + "/hook", Body: []byte(`{}`), MsgID: "msg_1", Secrets: []string{NewSecret()},
	})
	require.False(t, res.Success)
	require.Equal(t, herald.ErrorTLS, res.Class)
	require.Contains(t, res.Message, "evil\uFFFD.example", "the name is kept, cleaned")
	requireStorable(t, res)
}
