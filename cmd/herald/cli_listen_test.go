package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/client"
	"github.com/heraldhq/herald/internal/testdb"
	"github.com/heraldhq/herald/webhook"
)

// listenReceiver is the developer's local receiver: it records every
// request and answers 500 to the first request of an event whose type
// starts with "fail.", 200 otherwise.
type listenReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []listenHit
	failed map[string]bool
}

type listenHit struct {
	header http.Header
	body   []byte
}

func newListenReceiver(t *testing.T) *listenReceiver {
	r := &listenReceiver{failed: map[string]bool{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, listenHit{req.Header.Clone(), b})
		typ, id := req.Header.Get("Herald-Event-Type"), req.Header.Get("Webhook-Id")
		fail := strings.HasPrefix(typ, "fail.") && !r.failed[id]
		r.failed[id] = true
		r.mu.Unlock()
		w.Header().Set("X-Local", "yes")
		if fail {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "local receiver broke")
			return
		}
		_, _ = io.WriteString(w, "thanks")
	}))
	t.Cleanup(r.Close)
	return r
}

// hits are the requests of event type typ so far.
func (r *listenReceiver) hits(typ string) []listenHit {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []listenHit
	for _, h := range r.got {
		if h.header.Get("Herald-Event-Type") == typ {
			out = append(out, h)
		}
	}
	return out
}

// listenProc is a `herald listen` process.
type listenProc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
}

func startListen(t *testing.T, server string, args ...string) *listenProc {
	t.Helper()
	p := &listenProc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(heraldBinary(t), append([]string{"listen", "--server", server, "--token", cliToken}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.Env = os.Environ()
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

// interrupt sends SIGINT and waits for the exit.
func (p *listenProc) interrupt(t *testing.T) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("herald listen did not exit on SIGINT; stderr:\n%s", p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

func deliveryOf(t *testing.T, api *client.Client, eventID, subID string) *client.Delivery {
	t.Helper()
	list, err := api.ListDeliveries(context.Background(), client.DeliveryListParams{EventID: eventID, SubscriptionID: subID})
	require.NoError(t, err)
	require.Len(t, list.Data, 1)
	d, err := api.GetDelivery(context.Background(), list.Data[0].ID)
	require.NoError(t, err)
	return d
}

// TestListenEndToEnd runs `herald listen` against `herald serve` on both
// stores: a delivery made while no listener is connected fails
// transiently and arrives once one connects; deliveries arrive signed with
// the subscription's secret; a local 500 is recorded as the attempt's
// result and retried through the tiers; a temporary subscription
// (--event-types) is deleted when listen gets SIGINT.
func TestListenEndToEnd(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := setupCLI(t, backend, "--tiers", "0s,300ms,1s,2s,5s,10s")
			api := client.New(h.server, cliToken)
			ctx := context.Background()
			recv := newListenReceiver(t)

			// As the README says: a listen subscription from the CLI.
			created := h.okJSON("subscriptions", "create", "--destination-type", "listen", "--event-types", "order.*,fail.*")
			require.Len(t, created, 1)
			sub, err := api.GetSubscription(ctx, created[0]["id"].(string))
			require.NoError(t, err)
			require.Equal(t, "listen", sub.Destination.Type)
			sub.Secret = created[0]["secret"].(string)
			require.NotEmpty(t, sub.Secret)

			// No listener yet: the attempt fails transiently.
			early, err := api.Publish(ctx, client.EventInput{Type: "order.early", Data: []byte(`{"n":0}`)})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				return deliveryOf(t, api, early.ID, sub.ID).AttemptCount >= 1
			}, 20*time.Second, 20*time.Millisecond)
			d := deliveryOf(t, api, early.ID, sub.ID)
			a := (*d.Attempts)[0]
			require.Equal(t, "connection", a.Error)
			require.Contains(t, a.ErrorMessage, "no listener connected")
			require.NotEqual(t, "dead", d.State)

			p := startListen(t, h.server, "--subscription", sub.ID, "--forward", recv.URL+"/hook")
			require.Eventually(t, func() bool { return len(recv.hits("order.early")) == 1 }, 30*time.Second, 20*time.Millisecond,
				"stderr: %s", p.stderr)
			require.Eventually(t, func() bool { return deliveryOf(t, api, early.ID, sub.ID).State == "delivered" },
				10*time.Second, 20*time.Millisecond)

			// Delivered with a signature the subscription's secret verifies.
			ev, err := api.Publish(ctx, client.EventInput{Type: "order.created", Data: []byte(`{"n":1}`)})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return len(recv.hits("order.created")) == 1 }, 20*time.Second, 20*time.Millisecond)
			hit := recv.hits("order.created")[0]
			require.NoError(t, webhook.Verify([]string{sub.Secret}, hit.header, hit.body, time.Now(), 5*time.Minute))
			require.Contains(t, string(hit.body), ev.ID)
			require.Eventually(t, func() bool { return deliveryOf(t, api, ev.ID, sub.ID).State == "delivered" },
				10*time.Second, 20*time.Millisecond)
			d = deliveryOf(t, api, ev.ID, sub.ID)
			a = (*d.Attempts)[0]
			require.Equal(t, 200, a.Status)
			require.Equal(t, "thanks", a.ResponseExcerpt)
			require.Equal(t, "yes", a.ResponseHeaders["x-local"])
			require.NotEmpty(t, a.RequestHeaders["webhook-signature"])

			// A local 500 is the attempt's result, retried through the tiers.
			bad, err := api.Publish(ctx, client.EventInput{Type: "fail.once", Data: []byte(`{}`)})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return deliveryOf(t, api, bad.ID, sub.ID).State == "delivered" },
				20*time.Second, 20*time.Millisecond)
			d = deliveryOf(t, api, bad.ID, sub.ID)
			require.Len(t, *d.Attempts, 2)
			first := (*d.Attempts)[0]
			require.Equal(t, 500, first.Status)
			require.Equal(t, "http_status", first.Error)
			require.Equal(t, "local receiver broke", first.ResponseExcerpt)
			require.Equal(t, 0, first.Tier)
			require.Equal(t, 1, (*d.Attempts)[1].Tier)
			require.Len(t, recv.hits("fail.once"), 2)

			// One line per delivery on stdout.
			require.Eventually(t, func() bool {
				return strings.Contains(p.stdout.String(), "order.created  "+ev.ID+"  attempt 1  → 200")
			}, 5*time.Second, 20*time.Millisecond, "stdout: %s", p.stdout)
			require.Contains(t, p.stdout.String(), "fail.once  "+bad.ID+"  attempt 1  → 500")
			require.Equal(t, 0, p.interrupt(t))
			require.NotContains(t, p.stderr.String(), "context canceled")

			// A temporary subscription lives as long as its listener.
			tmp := startListen(t, h.server, "--event-types", "tmp.*", "--forward", recv.URL)
			idRe := regexp.MustCompile(`created temporary subscription (sub_[0-9a-z]+)`)
			var tmpID string
			require.Eventually(t, func() bool {
				m := idRe.FindStringSubmatch(tmp.stderr.String())
				if m != nil {
					tmpID = m[1]
				}
				return tmpID != "" && strings.Contains(tmp.stderr.String(), "listening:")
			}, 20*time.Second, 20*time.Millisecond, "stderr: %s", tmp.stderr)
			ts, err := api.GetSubscription(ctx, tmpID)
			require.NoError(t, err)
			require.Equal(t, "listen", ts.Destination.Type)
			require.Contains(t, ts.Description, "temporary")
			_, err = api.Publish(ctx, client.EventInput{Type: "tmp.x", Data: []byte(`{}`)})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return len(recv.hits("tmp.x")) == 1 }, 20*time.Second, 20*time.Millisecond)
			require.Equal(t, 0, tmp.interrupt(t), "stderr: %s", tmp.stderr)
			require.NotContains(t, tmp.stderr.String(), "context canceled")
			require.Contains(t, tmp.stderr.String(), "deleted temporary subscription "+tmpID)
			_, err = api.GetSubscription(ctx, tmpID)
			require.ErrorIs(t, err, client.ErrNotFound)
		})
	}
}

// With two nodes on one PostgreSQL database, a node holds only the
// listeners connected to it (ADR 0024): an attempt claimed by the other
// node fails transiently ("no listener connected to this node") and the
// delivery arrives once an attempt is claimed by the listener's node.
// Many short tiers make the last all but certain.
func TestListenTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := heraldBinary(t)
	schema := testdb.PostgresSchema(t)
	tiers := []string{"0s"}
	for i := 1; i <= 30; i++ {
		tiers = append(tiers, "100ms")
	}
	common := []string{"--dev", "--api-token", cliToken, "--tiers", strings.Join(tiers, ","), "--poll-interval", "50ms",
		"--database-url", testdb.URL() + sep(testdb.URL()) + "search_path=" + schema}
	addrA, addrB := freeAddr(t), freeAddr(t)
	startNode(t, bin, addrA, common...)
	startNode(t, bin, addrB, common...)
	apiA, apiB := client.New("http://"+addrA, cliToken), client.New("http://"+addrB, cliToken)
	ctx := context.Background()
	recv := newListenReceiver(t)

	sub, err := apiA.CreateSubscription(ctx, map[string]any{"destination": map[string]any{"type": "listen"}, "event_types": []string{"two.*"}})
	require.NoError(t, err)
	p := startListen(t, "http://"+addrA, "--subscription", sub.ID, "--forward", recv.URL)
	require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), "listening:") }, 20*time.Second, 20*time.Millisecond)

	// Published on node B: its direct dispatch attempts it there first.
	ev, err := apiB.Publish(ctx, client.EventInput{Type: "two.x", Data: []byte(`{}`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return deliveryOf(t, apiA, ev.ID, sub.ID).State == "delivered" }, 60*time.Second, 20*time.Millisecond)
	d := deliveryOf(t, apiA, ev.ID, sub.ID)
	require.Len(t, recv.hits("two.x"), 1)
	require.GreaterOrEqual(t, len(*d.Attempts), 2, "node B attempted it first (direct dispatch) and failed")
	for _, a := range (*d.Attempts)[:len(*d.Attempts)-1] {
		require.Equal(t, "connection", a.Error)
		require.Contains(t, a.ErrorMessage, "no listener connected to this node")
	}
	require.Equal(t, 200, (*d.Attempts)[len(*d.Attempts)-1].Status)
	require.Equal(t, 0, p.interrupt(t))
}

// herald listen refuses bad flags before it connects anywhere.
func TestListenUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"listen", "--subscription", "sub_x"}, "--forward is required"},
		{[]string{"listen", "--subscription", "sub_x", "--forward", "localhost:3000"}, "is not an http(s) URL"},
		{[]string{"listen", "--forward", "http://localhost:3000"}, "give --subscription ID"},
		{[]string{"listen", "--subscription", "sub_x", "--event-types", "a.*", "--forward", "http://localhost:3000"}, "not both"},
	} {
		env := testEnv("")
		err := runClient(context.Background(), append(c.args, "--server", "http://"+freeAddr(t), "--token", "x"), env)
		require.Error(t, err, c.args)
		require.Equal(t, exitUsage, exitCode(err), "%v: %v", c.args, err)
		require.Contains(t, err.Error(), c.want, c.args)
	}
}
