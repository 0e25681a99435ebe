// Package testbroker gives tests the URL of a real broker on the machine
// (RabbitMQ, NATS JetStream, Redis, Mosquitto), from the environment or the
// machine's default address. When the broker does not answer, the test is
// skipped with a visible message, or fails under CI=true, where every
// broker must run (.ci/run starts them). It also restarts a broker for the
// tests that stop one mid-stream.
package testbroker

import (
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// Kind names a broker.
type Kind string

const (
	AMQP  Kind = "amqp"
	NATS  Kind = "nats"
	Redis Kind = "redis"
	MQTT  Kind = "mqtt"
)

// The environment variables and defaults (the machine's brokers).
var (
	envs = map[Kind]string{
		AMQP: "HERALD_TEST_AMQP_URL", NATS: "HERALD_TEST_NATS_URL",
		Redis: "HERALD_TEST_REDIS_URL", MQTT: "HERALD_TEST_MQTT_URL",
	}
	defaults = map[Kind]string{
		AMQP: "amqp://guest:guest@127.0.0.1:5672/", NATS: "nats://127.0.0.1:4222",
		Redis: "redis://127.0.0.1:6379/0", MQTT: "mqtt://127.0.0.1:1883",
	}
)

// URL returns the broker's URL once its port accepts a connection; it
// skips the test (fails under CI=true) when it does not within 5 s.
func URL(t testing.TB, k Kind) string {
	t.Helper()
	u := os.Getenv(envs[k])
	if u == "" {
		u = defaults[k]
	}
	addr, err := hostPort(u)
	if err != nil {
		t.Fatalf("%s: bad URL %q: %v", envs[k], u, err)
	}
	if err := WaitUp(addr, 5*time.Second); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s broker at %s is not answering (CI=true: it must run): %v", k, addr, err)
		}
		t.Skipf("SKIP: no %s broker at %s (set %s): %v", k, addr, envs[k], err)
	}
	return u
}

// WaitUp waits until addr accepts a TCP connection or d passes.
func WaitUp(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		// The address is the test environment's own broker (HERALD_TEST_*_URL).
		c, err := net.DialTimeout("tcp", addr, time.Second) //nolint:gosec // G704: a test dials its configured broker
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func hostPort(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"amqp": "5672", "amqps": "5671", "nats": "4222", "tls": "4222",
			"redis": "6379", "rediss": "6379", "mqtt": "1883", "tcp": "1883", "mqtts": "8883"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}
