// Package testcert makes hostile TLS certificates for tests.
package testcert
