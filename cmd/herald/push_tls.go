package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// internalTLS builds the mutual TLS of the node-to-node listener from
// --internal-tls-cert, --internal-tls-key and --internal-tls-ca (nil, nil
// when they are not set): the listener requires a client certificate
// signed by the CA, and hand-offs present this node's certificate and
// accept only servers the CA signed. The bearer token is still required.
func internalTLS(c *config) (server, client *tls.Config, err error) {
	if c.InternalTLSCert == "" {
		return nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.InternalTLSCert, c.InternalTLSKey)
	if err != nil {
		return nil, nil, fmt.Errorf("--internal-tls-cert/--internal-tls-key: %w", err)
	}
	pem, err := os.ReadFile(c.InternalTLSCA)
	if err != nil {
		return nil, nil, fmt.Errorf("--internal-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, errors.New("--internal-tls-ca: no PEM certificate found")
	}
	server = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
	client = &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS12,
	}
	return server, client, nil
}
