package sourcetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/source"
)

// wait bounds every condition the suite waits for.
const wait = 60 * time.Second

// Run runs the conformance cases for one broker: dial is the broker
// package's source.Dialer, decode the API's event decoder
// (httpapi.DecodeEvent; a test file may import it).
func Run(t *testing.T, h Harness, dial source.Dialer, decode source.DecodeFunc) {
	t.Run("MappedEvents", func(t *testing.T) { testMapped(t, h, dial, decode) })
	t.Run("Defaults", func(t *testing.T) { testDefaults(t, h, dial, decode) })
	t.Run("PoisonNeverStalls", func(t *testing.T) { testPoison(t, h, dial, decode) })
	t.Run("StoreOutageAcksNothing", func(t *testing.T) { testStoreOutage(t, h, dial, decode) })
	t.Run("CompetingNodes", func(t *testing.T) { testCompeting(t, h, dial, decode) })
	t.Run("OrderedOneNode", func(t *testing.T) { testOrdered(t, h, dial, decode) })
	t.Run("BrokerRestart", func(t *testing.T) {
		r, ok := h.(Restarter)
		if !ok {
			t.Skip("the harness cannot restart its broker")
		}
		testRestart(t, h, r, dial, decode)
	})
}

// goodMsgs are n messages with mapped fields: id, kind, doc, v, payload.
func goodMsgs(prefix string, from, n int) ([]Msg, []string) {
	msgs := make([]Msg, 0, n)
	ids := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		body := fmt.Sprintf(`{"id":%q,"kind":"order.created","doc":"doc-%d","v":%d,"payload":{"n":%d,"name":"é \"q\""}}`,
			id, i%10, i, i)
		msgs = append(msgs, Msg{Body: []byte(body), Headers: map[string]string{"x-source-test": "1"}})
		ids = append(ids, id)
	}
	return msgs, ids
}

var fullMapping = &herald.SourceMapping{ID: "body.id", Type: "body.kind", Key: "body.doc",
	Version: "body.v", Data: "body.payload"}

func testMapped(t *testing.T, h Harness, dial source.Dialer, decode source.DecodeFunc) {
	rig := NewRig(t, h, dial, decode)
	src := h.NewSource(t)
	src.Mapping = fullMapping
	src = rig.CreateSource(t, src)
	msgs, ids := goodMsgs("mapped", 0, 300)
	h.Publish(t, src, msgs[:150])
	rig.Node(t, "n1")
	h.Publish(t, src, msgs[150:])
	evs := rig.WaitEvents(t, "", ids, wait)
	for i, id := range ids {
		ev := evs[id]
		require.Equal(t, "order.created", ev.Type)
		require.Equal(t, fmt.Sprintf("doc-%d", i%10), ev.Key)
		require.NotNil(t, ev.Version)
		require.EqualValues(t, i, *ev.Version)
		require.JSONEq(t, fmt.Sprintf(`{"n":%d,"name":"é \"q\""}`, i), string(ev.Data))
	}
	st := rig.WaitStatus(t, src.Name, wait, func(s *herald.SourceStatus) bool { return s.Consumed >= 300 })
	require.Equal(t, herald.SourceConsuming, st.State)
	require.Zero(t, st.Rejected)
	require.Equal(t, 300, rig.CountEvents(t), "one event per message")
}

func testDefaults(t *testing.T, h Harness, dial source.Dialer, decode source.DecodeFunc) {
	rig := NewRig(t, h, dial, decode)
	src := rig.CreateSource(t, h.NewSource(t))
	rig.Node(t, "n1")
	body := []byte(`{"a":1,"big":12345678901234567890}`)
	// The same body twice without a broker id: one event (its id is the
	// body's hash), the second a duplicate.
	h.Publish(t, src, []Msg{{Body: body}, {Body: body}})
	st := rig.WaitStatus(t, src.Name, wait, func(s *herald.SourceStatus) bool { return s.Consumed >= 2 })
	require.EqualValues(t, 1, st.Duplicates)
	require.Equal(t, 1, rig.CountEvents(t))
	evs := rig.WaitEvents(t, "", []string{hashID(body)}, wait)
	ev := evs[hashID(body)]
	require.Equal(t, string(body), string(ev.Data), "data is the body, byte for byte")
	require.NotEmpty(t, ev.Type, "type defaults to the route")
}

func testPoison(t *testing.T, h Harness, dial source.Dialer, decode source.DecodeFunc) {
	rig := NewRig(t, h, dial, decode)
	src := h.NewSource(t)
	src.Mapping = &herald.SourceMapping{ID: "body.id", Type: "body.kind", Tenant: "body.tenant"}
	src.Tenant = "acme"
	src = rig.CreateSource(t, src)
	rig.Node(t, "n1")
	var msgs []Msg
	var ids []string
	bad := []struct {
		body   []byte
		reason string
	}{
		{[]byte("not json at all"), herald.RejectNotJSON},
		{[]byte{'{', '"', 'a', '"', ':', '"', 0xff, 0xfe, '"', '}'}, herald.RejectNotJSON},
		{[]byte(`{"id":"big","kind":"x","pad":"` + strings.Repeat("x", MaxBody) + `"}`), herald.RejectTooLarge},
		{[]byte(`{"id":"notype"}`), herald.RejectMapping},
		{[]byte(`{"id":"reserved","kind":"herald.delivery.dead"}`), herald.RejectInvalid},
		{[]byte(`{"id":"nul","kind":"x\u0000y"}`), herald.RejectInvalid},
		{[]byte(`{"id":"other","kind":"x","tenant":"globex"}`), herald.RejectTenant},
	}
	rounds := 5
	for r := 0; r < rounds; r++ {
		for i, b := range bad {
			id := fmt.Sprintf("good-%d-%d", r, i)
			msgs = append(msgs, Msg{Body: []byte(fmt.Sprintf(`{"id":%q,"kind":"thing.happened"}`, id))}, Msg{Body: b.body})
			ids = append(ids, id)
		}
	}
	h.Publish(t, src, msgs)
	evs := rig.WaitEvents(t, "acme", ids, wait)
	for _, ev := range evs {
		require.Equal(t, "acme", ev.Tenant, "a pinned source's events are its tenant's")
	}
	want := int64(rounds * len(bad))
	st := rig.WaitStatus(t, src.Name, wait, func(s *herald.SourceStatus) bool { return s.Rejected >= want })
	require.Equal(t, want, st.Rejected)
	require.EqualValues(t, len(ids), st.Consumed)
	reasons := map[string]int{}
	for _, rj := range st.RecentRejects {
		reasons[rj.Reason]++
		require.NotEmpty(t, rj.Message)
	}
	for _, b := range bad {
		require.Positive(t, reasons[b.reason], "reason %s recorded (got %v)", b.reason, reasons)
	}
	// The source did not stall: a later good message still arrives.
	h.Publish(t, src, []Msg{{Body: []byte(`{"id":"after","kind":"thing.happened"}`)}})
	rig.WaitEvents(t, "acme", []string{"after"}, wait)
	if dl, ok := h.(DeadLetters); ok {
		deadline := time.Now().Add(wait)
		for dl.DeadLetters(t, src) < int(want) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		require.Equal(t, int(want), dl.DeadLetters(t, src), "every rejected message is where the broker keeps rejects")
	}
}

func testStoreOutage(t *testing.T, h Harness, dial source.Dialer, decode source.DecodeFunc) {
	rig := NewRig(t, h, dial, decode)
	src := h.NewSource(t)
	src.Mapping = fullMapping
	src = rig.CreateSource(t, src)
	rig.Publisher.Down.Store(true)
	rig.Node(t, "n1")
	msgs, ids := goodMsgs("outage", 0, 200)
	h.Publish(t, src, msgs)
	rig.WaitStatus(t, src.Name, wait, func(s *herald.SourceStatus) bool {
		return s.State == herald.SourceStoreUnavailable || strings.Contains(s.LastError, "store")
	})
	calls := rig.Publisher.Calls.Load()
	deadline := time.Now().Add(wait)
	for rig.Publisher.Calls.Load() < calls+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // it keeps trying by itself
	}
	require.Equal(t, 0, rig.CountEvents(t))
	rig.Publisher.Down.Store(false)
	rig.WaitEvents(t, "", ids, wait)
	require.Equal(t, 200, rig.CountEvents(t), "nothing lost, nothing twice")
	rig.WaitStatus(t, src.Name, wait, func(s *herald.SourceStatus) bool { return s.State == herald.SourceConsuming })
}

func testCompeting(t *testing.T, h Harness, dial source.Dialer, decode source.DecodeFunc) {
	rig := NewRig(t, h, dial, decode)
	src := h.NewSource(t)
	src.Mapping = fullMapping
	src = rig.CreateSource(t, src)
	rig.Node(t, "n1")
	rig.Node(t, "n2")
	rig.WaitStatus(t, src.Name, wait, func(s *herald.SourceStatus) bool {
		live := 0
		for _, n := range s.Nodes {
			if n.State == herald.SourceConsuming {
				live++
			}
		}
		return live == 2
	})
	msgs, ids := goodMsgs("compete", 0, 1000)
	h.Publish(t, src, msgs)
	rig.WaitEvents(t, "", ids, wait)
	require.Equal(t, 1000, rig.CountEvents(t))
}

func testOrdered(t *testing.T, h Harness, dial source.Dialer, decode source.DecodeFunc) {
	rig := NewRig(t, h, dial, decode)
	src := h.NewSource(t)
	src.Mapping = fullMapping
	src.Ordered = true
	src = rig.CreateSource(t, src)
	stop1 := rig.Node(t, "n1")
	rig.Node(t, "n2")
	rig.WaitStatus(t, src.Name, wait, func(s *herald.SourceStatus) bool {
		states := map[string]int{}
		for _, n := range s.Nodes {
			states[n.State]++
		}
		return states[herald.SourceConsuming] == 1 && states[herald.SourceStandby] == 1
	})
	msgs, ids := goodMsgs("ordered", 0, 200)
	h.Publish(t, src, msgs[:100])
	rig.WaitEvents(t, "", ids[:100], wait)
	// The consumer goes away; the other node takes the lease over.
	stop1()
	h.Publish(t, src, msgs[100:])
	rig.WaitEvents(t, "", ids, wait)
	require.Equal(t, 200, rig.CountEvents(t))
}

func testRestart(t *testing.T, h Harness, r Restarter, dial source.Dialer, decode source.DecodeFunc) {
	rig := NewRig(t, h, dial, decode)
	src := h.NewSource(t)
	src.Mapping = fullMapping
	src = rig.CreateSource(t, src)
	before, after := 2000, 1000
	if b, ok := h.(Backlog); ok {
		before, after = min(before, b.Backlog()), min(after, b.Backlog())
	}
	msgs, ids := goodMsgs("restart", 0, before+after)
	h.Publish(t, src, msgs[:before])
	rig.Node(t, "n1")
	rig.WaitStatus(t, src.Name, wait, func(s *herald.SourceStatus) bool { return s.Consumed > 0 })
	r.Restart(t, func() {})
	h.Publish(t, src, msgs[before:])
	rig.WaitEvents(t, "", ids, 2*wait)
	require.Equal(t, before+after, rig.CountEvents(t), "every message one event")
}

// hashID is the id a message without a broker id or mapped id gets.
func hashID(body []byte) string {
	return source.HashID(body)
}
