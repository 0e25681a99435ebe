package natsdest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/destination/desttest"
	natsdest "github.com/heraldhq/herald/destination/nats"
	"github.com/heraldhq/herald/internal/testbroker"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/webhook"
)

// TestMain drops the PostgreSQL schemas testdb may have pooled.
func TestMain(m *testing.M) { testdb.Main(m) }

const connName = "nats-test"

// harness adapts NATS JetStream to desttest: each Target is a stream of its
// own on a unique subject prefix, deleted on cleanup, read by a pull
// consumer on a connection of the test's.
type harness struct {
	url   string
	conns *destination.Static
	js    jetstream.JetStream
}

func newHarness(t *testing.T) *harness {
	u := testbroker.URL(t, testbroker.NATS)
	nc, err := nats.Connect(u, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return &harness{url: u, js: js, conns: destination.NewStatic(&herald.Connection{
		Name: connName, Type: herald.DestinationNATS, URL: u, AllTenants: true})}
}

func (h *harness) Type() herald.DestinationType { return herald.DestinationNATS }

func (h *harness) Publisher(t *testing.T) destination.Publisher {
	return natsdest.New(natsdest.Config{Connections: h.conns, BackoffMax: time.Second})
}

// stream creates a file-backed stream holding prefix.> and deletes it on
// cleanup.
func (h *harness) stream(t *testing.T) (jetstream.Stream, string) {
	t.Helper()
	id := strings.ToLower(strings.TrimPrefix(herald.NewID(""), "_"))
	prefix := "desttest_" + id
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := h.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "DESTTEST_" + strings.ToUpper(id), Subjects: []string{prefix + ".>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.js.DeleteStream(ctx, s.CachedInfo().Config.Name)
	})
	return s, prefix
}

func (h *harness) consumer(t *testing.T, s jetstream.Stream) consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: 5 * time.Minute})
	require.NoError(t, err)
	return consumer{c}
}

func (h *harness) Target(t *testing.T) (herald.Destination, desttest.Consumer) {
	s, prefix := h.stream(t)
	return herald.Destination{Type: herald.DestinationNATS, Connection: connName, Subject: prefix + ".events"}, h.consumer(t, s)
}

// Broken is a subject no stream holds: the publish has no responders.
func (h *harness) Broken(t *testing.T) (herald.Destination, herald.ErrorClass, bool) {
	return herald.Destination{Type: herald.DestinationNATS, Connection: connName,
		Subject: "desttest_nostream_" + strings.ToLower(strings.TrimPrefix(herald.NewID(""), "_"))}, herald.ErrorNoStream, true
}

type consumer struct{ c jetstream.Consumer }

func (c consumer) Next(ctx context.Context) (*desttest.Received, error) {
	for {
		wait := 2 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait <= 0 {
			return nil, context.DeadlineExceeded
		}
		m, err := c.c.Next(jetstream.FetchMaxWait(wait))
		if err == nil {
			return received(m), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			// The server restarting: try again until ctx ends.
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func received(m jetstream.Msg) *desttest.Received {
	r := &desttest.Received{Headers: map[string]string{}, Body: m.Data()}
	for k, v := range m.Headers() {
		if len(v) > 0 {
			r.Headers[strings.ToLower(k)] = v[0]
		}
	}
	return r
}

func TestConformance(t *testing.T) {
	desttest.Run(t, newHarness(t))
}

func request(d herald.Destination, eventType string, timeout time.Duration) *webhook.Request {
	return &webhook.Request{
		Body: []byte(`{"id":"evt_1","type":"x","data":{}}`), MsgID: herald.NewID(herald.PrefixDelivery),
		Secrets: []string{desttest.TestSecret}, Attempt: 1, EventType: eventType, Timeout: timeout,
		Timestamp: time.Now(), Destination: d,
	}
}

func TestSubject(t *testing.T) {
	for in, want := range map[string]string{
		"order.created":   "order.created",
		"a..b>":           "a._.b_",
		".x.":             "_.x._",
		"orders.*":        "orders._",
		"bundle.>":        "bundle._",
		"commande.créée":  "commande.créée",
		"a\u00a0b.c\x7fd": "a_b.c_d",
	} {
		require.Equal(t, want, natsdest.Subject(in), in)
	}
}

// Without a subject, the message goes to the one derived from the event
// type, and carries Nats-Msg-Id = webhook-id.
func TestDefaultSubjectAndMsgID(t *testing.T) {
	h := newHarness(t)
	pub := h.Publisher(t)
	defer pub.Close()
	s, prefix := h.stream(t)
	c := h.consumer(t, s)
	req := request(herald.Destination{Type: herald.DestinationNATS, Connection: connName}, prefix+".order..created*", 5*time.Second)
	res := pub.Send(context.Background(), req)
	require.True(t, res.Success, "%s: %s", res.Class, res.Message)
	m, err := c.c.Next(jetstream.FetchMaxWait(10 * time.Second))
	require.NoError(t, err)
	require.Equal(t, prefix+".order._.created_", m.Subject())
	require.Equal(t, req.MsgID, m.Headers().Get(jetstream.MsgIDHeader))
	require.Equal(t, req.MsgID, m.Headers().Get(destination.HeaderID))

	// The same delivery sent again (its PubAck was lost, say) is stored
	// once: the stream acks it as a duplicate.
	res = pub.Send(context.Background(), req)
	require.True(t, res.Success, "%s: %s", res.Class, res.Message)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)

	bad := request(herald.Destination{Type: herald.DestinationNATS, Connection: connName, Subject: prefix + ".a.*"}, "x", 5*time.Second)
	res = pub.Send(context.Background(), bad)
	require.Equal(t, herald.ErrorInvalidRequest, res.Class, res.Message)
}

// A server that is down fails the attempt at once (refused) or at the
// attempt's timeout (a server that accepts and never answers), and never
// holds a publish to another connection.
func TestServerDown(t *testing.T) {
	h := newHarness(t)
	silent := desttest.NewHoldingServer(t) // accepts and never speaks: the handshake hangs
	refusedAddr := desttest.RefusedAddr(t)
	h.conns.Put(&herald.Connection{Name: "silent", Type: herald.DestinationNATS, URL: "nats://" + silent.Addr, AllTenants: true})
	h.conns.Put(&herald.Connection{Name: "refused", Type: herald.DestinationNATS, URL: "nats://user:secretpw@" + refusedAddr, AllTenants: true})
	pub := natsdest.New(natsdest.Config{Connections: h.conns, DialTimeout: time.Minute})
	defer pub.Close()

	res := pub.Send(context.Background(), request(herald.Destination{Type: herald.DestinationNATS, Connection: "refused", Subject: "x"}, "x", 5*time.Second))
	require.Equal(t, herald.ErrorConnection, res.Class, res.Message)
	require.NotContains(t, res.Message, "secretpw")

	silentDone := make(chan webhook.Result, 1)
	go func() {
		silentDone <- pub.Send(context.Background(), request(herald.Destination{Type: herald.DestinationNATS, Connection: "silent", Subject: "x"}, "x", 3*time.Second))
	}()
	good, c := h.Target(t)
	for range 5 {
		res := pub.Send(context.Background(), request(good, "x", 10*time.Second))
		require.True(t, res.Success, "%s: %s", res.Class, res.Message)
		select {
		case r := <-silentDone:
			t.Fatalf("the silent server's attempt ended before the good ones: %+v", r)
		default:
		}
	}
	desttest.Drain(t, c, 5, 10*time.Second)
	r := <-silentDone
	require.Equal(t, herald.ErrorTimeout, r.Class, r.Message)
}

// natsServer is the machine's nats-server (as .ci/run starts it).
const (
	natsExec  = "/usr/sbin/nats-server"
	natsAddr  = "127.0.0.1:4222"
	natsStore = "/var/lib/nats-server"
	natsLog   = "/var/log/nats-server.log"
)

// natsPID is the pid of the nats-server serving 127.0.0.1:4222 (its
// executable and "-p 4222" in its command line), 0 when none runs.
func natsPID(t *testing.T) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	require.NoError(t, err)
	for _, d := range dirs {
		exe, err := os.Readlink(filepath.Join(d, "exe"))
		if err != nil || exe != natsExec {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), "-p 4222") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(d))
		if err == nil {
			return pid
		}
	}
	return 0
}

// stopNATS stops the server (SIGTERM) and waits until it is gone.
func stopNATS(t *testing.T) {
	t.Helper()
	pid := natsPID(t)
	require.NotZero(t, pid, "no nats-server on %s to stop", natsAddr)
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	require.Eventually(t, func() bool { return natsPID(t) == 0 }, 30*time.Second, 50*time.Millisecond)
}

// startNATS starts the server with .ci/run's command, when it is not
// running, and waits until it answers with JetStream ready.
func startNATS(t *testing.T) {
	t.Helper()
	if natsPID(t) == 0 {
		out, err := exec.Command("start-stop-daemon", "--start", "--oknodo", "--background", "--exec", natsExec, "--",
			"-a", "127.0.0.1", "-p", "4222", "-js", "-sd", natsStore, "-l", natsLog).CombinedOutput()
		require.NoError(t, err, "start nats-server: %s", out)
	}
	require.NoError(t, testbroker.WaitUp(natsAddr, time.Minute))
	require.Eventually(t, func() bool {
		nc, err := nats.Connect("nats://"+natsAddr, nats.Timeout(time.Second))
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err == nil
	}, time.Minute, 100*time.Millisecond, "JetStream did not answer after the restart")
}

// TestServerRestart publishes a steady stream of events through a real
// engine while nats-server is stopped and started again: every event ends
// delivered, once: a publish re-sent after its PubAck was lost carries the
// same Nats-Msg-Id and the stream drops the copy.
func TestServerRestart(t *testing.T) {
	h := newHarness(t)
	if _, err := os.Stat(natsExec); err != nil {
		t.Skip("SKIP: no " + natsExec + " to restart")
	}
	if natsPID(t) == 0 {
		t.Skip("SKIP: the NATS server on " + natsAddr + " is not the machine's nats-server")
	}
	t.Cleanup(func() { startNATS(t) })
	s, prefix := h.stream(t)
	pub := h.Publisher(t)
	defer pub.Close()
	tiers := delivery.Tiers{0, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second,
		10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	rig := desttest.NewRig(t, herald.DestinationNATS, pub, tiers)
	sub := rig.Subscribe(t, herald.Destination{Type: herald.DestinationNATS, Connection: connName, Subject: prefix + ".events"}, nil)

	const batches, perBatch = 30, 10
	typ := "desttest.restart"
	for b := range batches {
		evs := make([]desttest.Event, perBatch)
		for i := range evs {
			evs[i] = desttest.Event{Type: typ, Seq: b*perBatch + i}
		}
		rig.Publish(t, []*herald.Subscription{sub}, evs...)
		if b == batches/3 {
			t.Log("stopping nats-server (SIGTERM)")
			stopNATS(t)
		}
		if b == 2*batches/3 {
			t.Log("starting nats-server (.ci/run's command)")
			startNATS(t)
		}
		time.Sleep(50 * time.Millisecond) // the stream's pace, not a wait for work
	}
	const n = batches * perBatch
	retried := rig.AllDelivered(t, sub.ID, n, 3*time.Minute)
	t.Logf("failed attempts during the outage, by class: %v", rig.FailedAttempts(t, sub.ID))
	msgs := desttest.Drain(t, h.consumer(t, s), n, time.Minute)
	distinct, dups := desttest.Distinct(msgs)
	t.Logf("nats-server restart: %d events, %d messages in the stream, %d distinct webhook-ids, %d duplicated ids %v (JetStream drops re-sent ones by Nats-Msg-Id), %d deliveries retried",
		n, len(msgs), distinct, len(dups), dups, retried)
	require.Equal(t, n, distinct, "every event delivered")
	require.Empty(t, dups, "JetStream dedupes by Nats-Msg-Id: no duplicates")
	require.Len(t, msgs, n)
}

// Close ends the connection; a later attempt fails instead of dialling
// again (the node is shutting down).
func TestSendAfterClose(t *testing.T) {
	h := newHarness(t)
	pub := h.Publisher(t)
	d, c := h.Target(t)
	require.True(t, pub.Send(context.Background(), request(d, "x", 5*time.Second)).Success)
	desttest.Drain(t, c, 1, 10*time.Second)
	pub.Close()
	res := pub.Send(context.Background(), request(d, "x", 5*time.Second))
	require.False(t, res.Success)
	require.Equal(t, herald.ErrorConnection, res.Class, res.Message)
}
