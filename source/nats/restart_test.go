package natssrc

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/source"
	"github.com/heraldhq/herald/source/sourcetest"
)

// These tests stop the machine's nats-server (and start it again, also
// on failure); they are not parallel.

type received struct {
	msgs []*source.Message
	err  error
}

// receiveAsync runs Receive (a long ctx) in the background.
func receiveAsync(t *testing.T, c *Consumer) <-chan received {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	ch := make(chan received, 1)
	go func() {
		msgs, err := c.Receive(ctx, 10)
		ch <- received{msgs, err}
	}()
	return ch
}

// TestReceiveAcrossRestart: a Receive waiting while the server restarts
// does not hang: it returns the message published after the restart, or
// an error (the runner then dials again); no message is lost.
func TestReceiveAcrossRestart(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	c := dial(t, h, src, 10)
	got := receiveAsync(t, c)
	time.Sleep(200 * time.Millisecond) // let Receive wait; not an assertion
	h.Restart(t, func() {})
	h.Publish(t, src, []sourcetest.Msg{{Body: []byte("after-restart")}})
	var r received
	select {
	case r = <-got:
	case <-time.After(60 * time.Second):
		t.Fatal("Receive still waiting 60 s after the restart")
	}
	if r.err != nil {
		t.Logf("Receive failed across the restart (the runner dials again): %v", r.err)
		require.NotErrorIs(t, r.err, context.DeadlineExceeded)
		_ = c.Close()
		c = dial(t, h, src, 10)
		r.msgs = receiveN(t, c, 1)
	}
	require.Equal(t, []string{"after-restart"}, texts(r.msgs))
	require.NoError(t, c.Settle(context.Background(), r.msgs, nil))
}

// TestReceiveFailsWhileServerDown: when the server stays down longer
// than the client reconnects, a waiting Receive returns an error.
func TestReceiveFailsWhileServerDown(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	c := dial(t, h, src, 10)
	got := receiveAsync(t, c)
	time.Sleep(200 * time.Millisecond) // let Receive wait; not an assertion
	h.Restart(t, func() {
		select {
		case r := <-got:
			require.Error(t, r.err)
			require.NotErrorIs(t, r.err, context.DeadlineExceeded)
			t.Logf("Receive: %v", r.err)
		case <-time.After(reconnectWait*maxReconnects + 30*time.Second):
			t.Error("Receive still waiting while the server is down")
		}
		n, ok := c.Pending(context.Background())
		require.False(t, ok, "pending %d from a closed connection", n)
	})
	// A new consumer works once the server is back.
	c2 := dial(t, h, src, 10)
	h.Publish(t, src, []sourcetest.Msg{{Body: []byte("back")}})
	msgs := receiveN(t, c2, 1)
	require.Equal(t, []string{"back"}, texts(msgs))
	require.NoError(t, c2.Settle(context.Background(), msgs, nil))
}

// A server that stalls past two heartbeats (here: SIGSTOP for 5 s, as a
// loaded machine can) while the connection stays up loses the pull, not
// the consumer: Receive re-issues the pull and gets the next message
// instead of failing (a failure made the runner redial, and a test under
// load flaky).
func TestReceiveSurvivesAStalledServer(t *testing.T) {
	h := newHarness(t)
	src := h.NewSource(t)
	c := dial(t, h, src, 5)
	out, err := exec.Command("pidof", "nats-server").Output()
	require.NoError(t, err, "pidof nats-server")
	pid := strings.Fields(string(out))[0]
	require.NoError(t, exec.Command("kill", "-STOP", pid).Run())
	cont := func() { _ = exec.Command("kill", "-CONT", pid).Run() }
	t.Cleanup(cont)
	got := make(chan error, 1)
	go func() {
		msgs, err := receive(c, 5, 30*time.Second)
		if err == nil && len(msgs) != 1 {
			err = fmt.Errorf("got %d messages, want 1", len(msgs))
		}
		got <- err
	}()
	time.Sleep(2*pullHeartbeat + time.Second)
	cont()
	h.Publish(t, src, bodies("after-stall", 1))
	require.NoError(t, <-got)
}
