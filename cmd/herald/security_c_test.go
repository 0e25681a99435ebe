package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/push"
)

// TestServeMetricsToken (issue 20, item 9): herald serve --metrics-token
// makes GET /metrics answer only that bearer.
func TestServeMetricsToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	addr := freeAddr(t)
	startNode(t, bin, addr, "--data-dir", t.TempDir(), "--api-token", "api-token", "--metrics-token", "scrape-token")
	scrape := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, scrape(""))
	require.Equal(t, http.StatusUnauthorized, scrape("api-token"))
	require.Equal(t, http.StatusOK, scrape("scrape-token"))
}

// TestServeInternalListenNeedsURL (issue 20, item 8): --internal-listen on
// every address without --internal-url is refused at startup (every such
// node was http://[::]:PORT to the others).
func TestServeInternalListenNeedsURL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	out, err := exec.Command(bin, "serve", "--listen", freeAddr(t), "--data-dir", t.TempDir(), "--internal-listen", ":0").CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "set --internal-url")
}

// writeTestPKI writes a CA and a certificate it signed for 127.0.0.1
// (server and client use) as PEM files, and returns their paths.
func writeTestPKI(t *testing.T) (certFile, keyFile, caFile string) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "herald test nodes CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "herald node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600))
		return p
	}
	return write("node.pem", "CERTIFICATE", der), write("node.key", "EC PRIVATE KEY", keyDER), write("ca.pem", "CERTIFICATE", caDER)
}

// TestPushTwoNodesMutualTLS (issue 20, item 15d): with --internal-tls-*,
// the node-to-node listener speaks TLS and requires a client certificate
// the CA signed; hand-offs between two nodes present theirs.
func TestPushTwoNodesMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	schema := testdb.PostgresSchema(t)
	bin := heraldBinary(t)
	cert, key, ca := writeTestPKI(t)
	common := []string{"--dev", "--api-token", "tls-token", "--push-crypto-keys", push.GenerateKey(), "--push-ack-wait", "300ms",
		"--internal-tls-cert", cert, "--internal-tls-key", key, "--internal-tls-ca", ca,
		"--database-url", testdb.URL() + sep(testdb.URL()) + "search_path=" + schema}
	addrA, addrB, internalA := freeAddr(t), freeAddr(t), freeAddr(t)
	startNode(t, bin, addrA, append(common, "--internal-listen", internalA)...)
	startNode(t, bin, addrB, append(common, "--internal-listen", freeAddr(t))...)

	ua := dialUA(t, addrA, "")
	epB := strings.Replace(ua.register(), addrA, addrB, 1)
	done := make(chan int, 1)
	go func() { st, _ := pushSend(epB, "via B over mTLS"); done <- st }()
	n := ua.read(10 * time.Second)
	require.NotNil(t, n, "no notification through node A")
	require.Equal(t, "via B over mTLS", payloadOf(t, n))
	ua.ack(n)
	require.Equal(t, http.StatusCreated, <-done)

	// Plain HTTP, or TLS without a client certificate, gets nowhere.
	// (net/http answers plain HTTP on a TLS listener with 400.)
	resp, err := http.Get("http://" + internalA + "/notif/" + ua.uaid)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	caPEM, err := os.ReadFile(ca)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(http.MethodPut, "https://"+internalA+"/notif/"+ua.uaid, nil)
	require.NoError(t, err)
	_, err = noCert.Do(req)
	require.Error(t, err, "a client without a certificate is refused")
}
