package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testbroker"
)

// The black-box tests of broker sources (issue 23): the real binary
// consumes from the machine's real brokers and acknowledges a message only
// after its event committed. Killed with SIGKILL mid-stream, or with its
// broker restarted mid-stream, it must still turn every message into
// exactly one stored event.

const srcToken = "src-e2e-token"

// srcTotal is how many messages each stream test publishes.
const srcTotal = 10000

// srcHerald is one herald process serving sources, restartable on the
// same store.
type srcHerald struct {
	bin, addr string
	args      []string
	n         *node
}

// startSrcHerald starts herald on store args (storeArgs) with the test
// token and a fixed node id, so that a restarted process is the same MQTT
// client (its broker session, holding what was not acknowledged, resumes).
func startSrcHerald(t *testing.T, store []string, nodeID string) *srcHerald {
	t.Helper()
	h := &srcHerald{bin: heraldBinary(t), addr: freeAddr(t)}
	h.args = append([]string{"--dev", "--api-token", srcToken, "--node-id", nodeID, "--poll-interval", "50ms",
		"--shutdown-timeout", "1s"}, store...)
	h.n = startNode(t, h.bin, h.addr, h.args...)
	return h
}

func (h *srcHerald) restart(t *testing.T) {
	t.Helper()
	h.n.kill9(t)
	h.n = startNode(t, h.bin, h.addr, h.args...)
}

// call makes an API call; a transport error is code 0 (herald may be down).
func (h *srcHerald) call(ctx context.Context, method, path string, body any) (int, []byte) {
	code, b, err := apiCall(ctx, h.addr, srcToken, method, path, body)
	if err != nil {
		return 0, []byte(err.Error())
	}
	return code, b
}

// mustCall makes an API call that must answer want.
func (h *srcHerald) mustCall(t *testing.T, method, path string, body any, want int) map[string]any {
	t.Helper()
	code, b := h.call(context.Background(), method, path, body)
	require.Equal(t, want, code, "%s %s: %s", method, path, b)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// createSource creates connection "src" to broker b and source name on it
// with mapping, and waits until herald consumes it.
func (h *srcHerald) createSource(t *testing.T, b *srcBroker, name string, mapping map[string]any) {
	t.Helper()
	h.mustCall(t, http.MethodPost, "/v1/connections", map[string]any{"name": "src-" + name, "type": string(b.kind), "url": b.url}, http.StatusCreated)
	src := map[string]any{"name": name, "type": string(b.kind), "connection": "src-" + name, "mapping": mapping, "enabled": true}
	for k, v := range b.fields {
		src[k] = v
	}
	h.mustCall(t, http.MethodPost, "/v1/sources", src, http.StatusCreated)
	h.waitSourceState(t, name, "consuming", 30*time.Second)
}

// sourceStatus is the part of GET /v1/sources/{name} the tests read.
type sourceStatus struct {
	Status struct {
		State      string `json:"state"`
		Consumed   int64  `json:"consumed"`
		Duplicates int64  `json:"duplicates"`
		Rejected   int64  `json:"rejected"`
		LastError  string `json:"last_error"`
		Nodes      []struct {
			Node       string `json:"node"`
			State      string `json:"state"`
			Consumed   int64  `json:"consumed"`
			Duplicates int64  `json:"duplicates"`
		} `json:"nodes"`
	} `json:"status"`
}

func (h *srcHerald) sourceStatus(ctx context.Context, name string) (sourceStatus, string) {
	var st sourceStatus
	code, b := h.call(ctx, http.MethodGet, "/v1/sources/"+name, nil)
	if code != http.StatusOK {
		return st, fmt.Sprintf("%d %s", code, b)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, err.Error()
	}
	return st, string(b)
}

// waitSourceState waits until every node reporting the source is in state.
func (h *srcHerald) waitSourceState(t *testing.T, name, state string, d time.Duration) {
	t.Helper()
	waitFor(t, d, func() (bool, string) {
		st, raw := h.sourceStatus(context.Background(), name)
		return st.Status.State == state, raw
	}, func(last string) string {
		return fmt.Sprintf("source %s is not %s: %s\nlogs:\n%s", name, state, last, h.n.logs.Tail(8<<10))
	})
}

// eventStored reports whether event id is stored (false while herald is
// down).
func (h *srcHerald) eventStored(ctx context.Context, id string) bool {
	code, _ := h.call(ctx, http.MethodGet, "/v1/events/"+url.PathEscape(id), nil)
	return code == http.StatusOK
}

// eventIDs lists the ids of every stored event (not herald's own), each as
// often as listed.
func (h *srcHerald) eventIDs(ctx context.Context) ([]string, error) {
	var ids []string
	cursor := ""
	for {
		path := "/v1/events?exclude_system=true&limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		code, b := h.call(ctx, http.MethodGet, path, nil)
		if code != http.StatusOK {
			return nil, fmt.Errorf("GET /v1/events: %d %s", code, b)
		}
		var page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, err
		}
		for _, e := range page.Data {
			ids = append(ids, e.ID)
		}
		if page.NextCursor == "" || len(page.Data) == 0 {
			return ids, nil
		}
		cursor = page.NextCursor
	}
}

// streamPublisher publishes srcTotal messages to b in batches from its own
// goroutine, each batch again until the broker took all of it (a broker
// restart), paced by b.window against what h stored.
type streamPublisher struct {
	published atomic.Int64
	done      chan struct{}
	err       atomic.Value // last publish error, for failure messages
}

func publishStream(ctx context.Context, t *testing.T, h *srcHerald, b *srcBroker, prefix string) *streamPublisher {
	p := &streamPublisher{done: make(chan struct{})}
	const batch = 100
	go func() {
		defer close(p.done)
		for next := 0; next < srcTotal && ctx.Err() == nil; {
			if next >= b.window && !h.eventStored(ctx, msgID(prefix, next-b.window)) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			end := min(next+batch, srcTotal)
			bodies := make([][]byte, 0, end-next)
			for i := next; i < end; i++ {
				bodies = append(bodies, fmt.Appendf(nil, `{"id":%q,"n":%d,"pad":"%0100d"}`, msgID(prefix, i), i, i))
			}
			if err := b.publish(ctx, bodies); err != nil {
				p.err.Store(err.Error())
				time.Sleep(200 * time.Millisecond)
				continue // the same batch again: its ids make copies duplicates
			}
			next = end
			p.published.Store(int64(next))
		}
	}()
	t.Cleanup(func() { <-p.done })
	return p
}

// TestSourceKill9 publishes 10,000 messages to each broker while herald
// (SQLite) consumes them, kills herald with SIGKILL when about a third
// are stored, restarts it on the same data directory, and requires every
// message to be exactly one stored event: the broker redelivers what was
// not acknowledged, and the ids make redeliveries duplicates.
func TestSourceKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	for _, kind := range []testbroker.Kind{testbroker.AMQP, testbroker.NATS, testbroker.Redis, testbroker.MQTT} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			runSourceStream(t, kind, func(t *testing.T, h *srcHerald) { h.restart(t) })
		})
	}
}

// TestSourceBrokerRestart is TestSourceKill9 with the broker restarted
// mid-stream instead of herald: RabbitMQ (stop_app, start_app) and NATS
// (the server process). herald's consumer sees the connection break,
// redials with backoff or rides the client's reconnect, and consumes the
// rest; the test's publisher publishes its unconfirmed batch again. Not
// Redis: the machine's server keeps nothing on disk (.ci/run), so a
// restart loses the stream by design. Not MQTT: Mosquitto 2.0.11 does not
// persist shared subscriptions (source/mqtt's doc), so messages published
// before herald subscribes again have no subscriber. Not parallel: it owns
// the brokers for its duration (other tests' connections break too).
func TestSourceBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Run("amqp", func(t *testing.T) {
		runSourceStream(t, testbroker.AMQP, func(t *testing.T, _ *srcHerald) { rabbitRestart(t, 2*time.Second) })
	})
	t.Run("nats", func(t *testing.T) {
		runSourceStream(t, testbroker.NATS, func(t *testing.T, _ *srcHerald) { natsRestart(t, 2*time.Second) })
	})
}

// runSourceStream is the stream test on one broker: disrupt runs once a
// third of the messages are stored.
func runSourceStream(t *testing.T, kind testbroker.Kind, disrupt func(t *testing.T, h *srcHerald)) {
	start := time.Now()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	b := newSrcBroker(t, kind, suffix)
	h := startSrcHerald(t, storeArgs(t, "sqlite"), "src-"+string(kind)+"-"+suffix)
	h.createSource(t, b, "stream", map[string]any{"id": "body.id", "type": "'e2e.stream'"})

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	prefix := "m" + suffix
	p := publishStream(ctx, t, h, b, prefix)

	third := msgID(prefix, srcTotal/3)
	waitFor(t, 90*time.Second, func() (bool, string) {
		return h.eventStored(ctx, third), fmt.Sprintf("published %d", p.published.Load())
	}, func(last string) string {
		_, raw := h.sourceStatus(ctx, "stream")
		return fmt.Sprintf("a third was not stored (%s, publish error %v); source: %s\nlogs:\n%s", last, p.err.Load(), raw, h.n.logs.Tail(8<<10))
	})
	disrupted, published := time.Now(), p.published.Load()
	disrupt(t, h)
	t.Logf("%s: disrupted %.1fs after the start, with %d of %d published; back after %.1fs",
		kind, disrupted.Sub(start).Seconds(), published, srcTotal, time.Since(disrupted).Seconds())

	// Every message id becomes a stored event, and nothing else does.
	var ids []string
	waitFor(t, 2*time.Minute, func() (bool, string) {
		var err error
		if ids, err = h.eventIDs(ctx); err != nil {
			return false, err.Error()
		}
		return len(ids) >= srcTotal, fmt.Sprintf("%d events stored, %d published", len(ids), p.published.Load())
	}, func(last string) string {
		_, raw := h.sourceStatus(ctx, "stream")
		return fmt.Sprintf("not every message became an event (%s; publish error %v); source: %s\nlogs:\n%s", last, p.err.Load(), raw, h.n.logs.Tail(8<<10))
	})
	<-p.done
	seen := make(map[string]int, len(ids))
	for _, id := range ids {
		seen[id]++
	}
	for i := range srcTotal {
		require.Equal(t, 1, seen[msgID(prefix, i)], "message %d: listed events with its id", i)
	}
	require.Len(t, ids, srcTotal, "exactly one event per message, no other")

	// Each id reads back as an event (GET /v1/events/{id}), 16 at a time.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		missing []string
	)
	jobs := make(chan string)
	for range 16 {
		wg.Go(func() {
			for id := range jobs {
				if !h.eventStored(ctx, id) {
					mu.Lock()
					missing = append(missing, id)
					mu.Unlock()
				}
			}
		})
	}
	for i := range srcTotal {
		jobs <- msgID(prefix, i)
	}
	close(jobs)
	wg.Wait()
	require.Empty(t, missing, "GET /v1/events/{id} must find every message's event")

	// The source's status agrees that nothing was rejected. (Its counters
	// are not compared with the total: a node killed with SIGKILL loses
	// what it counted since its last report.)
	var st sourceStatus
	waitFor(t, 30*time.Second, func() (bool, string) {
		var raw string
		st, raw = h.sourceStatus(ctx, "stream")
		return st.Status.State == "consuming" && st.Status.Consumed > 0, raw
	}, func(last string) string { return "the source does not report consuming: " + last })
	require.Zero(t, st.Status.Rejected, "no message rejected")
	t.Logf("%s: %d messages, %d events, %d redelivered as duplicates, in %.1fs; herald since its last start: %s",
		kind, srcTotal, len(ids), st.Status.Duplicates, time.Since(start).Seconds(), h.commitStats(ctx))
}

// commitStats summarises herald's group commits from /metrics (count, mean
// batch size, mean commit time), for the tests' logs: how a source's
// throughput came about.
func (h *srcHerald) commitStats(ctx context.Context) string {
	code, b := h.call(ctx, http.MethodGet, "/metrics", nil)
	if code != http.StatusOK {
		return fmt.Sprintf("metrics: %d", code)
	}
	vals := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		switch name {
		case "herald_ingest_commit_batch_size_sum", "herald_ingest_commit_batch_size_count", "herald_ingest_commit_duration_seconds_sum":
			vals[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	n := vals["herald_ingest_commit_batch_size_count"]
	if n == 0 {
		return "no commits"
	}
	return fmt.Sprintf("%.0f commits, mean batch %.1f events, mean commit %.1f ms", n,
		vals["herald_ingest_commit_batch_size_sum"]/n, 1000*vals["herald_ingest_commit_duration_seconds_sum"]/n)
}
