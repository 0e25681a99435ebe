package destination

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/heraldhq/herald"
)

// TLSConfig builds the client TLS of a connection: TLS 1.2 at least, then
// ApplyTLS.
func TLSConfig(t *herald.ConnectionTLS) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if err := ApplyTLS(c, t); err != nil {
		return nil, err
	}
	return c, nil
}

// ApplyTLS sets the client side of c from a connection's TLS settings:
// the roots of tls.ca_file instead of the system's, the client
// certificate, the server name when set, and InsecureSkipVerify (an
// admin's explicit per-connection choice, documented as tests only).
func ApplyTLS(c *tls.Config, t *herald.ConnectionTLS) error {
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return fmt.Errorf("reading tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return errors.New("tls.ca_file holds no PEM certificate")
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return fmt.Errorf("loading tls client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	if t.ServerName != "" {
		c.ServerName = t.ServerName
	}
	c.InsecureSkipVerify = t.InsecureSkipVerify
	return nil
}
