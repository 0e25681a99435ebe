package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// nulCertificate is a self-signed certificate whose only DNS name holds a
// NUL byte. Go's x509 quotes the names verbatim in a HostnameError, so a
// receiver serving it puts a NUL into the error text of every attempt.
func nulCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "hostile"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"evil\x00.example"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

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
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{nulCertificate(t)}}
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
