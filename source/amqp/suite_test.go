package amqpsrc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/source/sourcetest"
)

// TestConformance runs the sources' conformance suite against the local
// RabbitMQ, including a restart of its application (rabbitmqctl
// stop_app/start_app) and the dead-letter count of rejected messages.
func TestConformance(t *testing.T) {
	sourcetest.Run(t, newHarness(t), Dial, httpapi.DecodeEvent)
}

// A source whose queue does not exist reports so in its status (the
// runner keeps retrying; creating the queue later makes it consume).
func TestMissingQueueInStatus(t *testing.T) {
	h := newHarness(t)
	rig := sourcetest.NewRig(t, h, Dial, httpapi.DecodeEvent)
	queue := "herald-srctest-missing-" + strings.ToLower(herald.NewID(""))
	src := rig.CreateSource(t, &herald.Source{Type: herald.DestinationAMQP, Queue: queue,
		Mapping: &herald.SourceMapping{ID: "body.id", Type: "body.kind"}})
	rig.Node(t, "n1")
	st := rig.WaitStatus(t, src.Name, time.Minute, func(s *herald.SourceStatus) bool {
		return strings.Contains(s.LastError, fmt.Sprintf("queue %q does not exist", queue))
	})
	require.Equal(t, herald.SourceFailed, st.State)

	ch := h.channel(t)
	_, err := ch.QueueDeclare(queue, false, true, false, false, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = h.channel(t).QueueDelete(queue, false, false, false) })
	h.Publish(t, src, []sourcetest.Msg{{Body: []byte(`{"id":"late","kind":"thing.happened"}`)}})
	rig.WaitEvents(t, "", []string{"late"}, time.Minute)
}
