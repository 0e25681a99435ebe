package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/testbroker"
)

// The GOV.UK case of issue 23 (seed 001, "Debouncing Publishing API"):
// Publishing API announces content changes on a RabbitMQ topic exchange,
// several messages per document within milliseconds, consumed by many
// workers so that broker order is not version order; Discovery Engine
// accepts roughly one update per document per second and has no
// versioning, so an older payload must never overwrite a newer one.
// herald consumes the queue (key = content_id, version = payload_version)
// and a subscription with ordering latest, key_interval_ms 1000 and a rate
// limit delivers to a stand-in Discovery Engine that checks both rules.

const (
	govukDocs      = 200
	govukRounds    = 4 // bursts per document
	govukPerRound  = 4 // versions per burst, published within milliseconds
	govukPubs      = 8 // concurrent publishers
	govukInterval  = time.Second
	govukRateMax   = 100 // rate_limit.max per second
	govukRoundStep = 400 * time.Millisecond
	// govukSlack is how much closer than the interval the receiver may
	// see two arrivals of one document: a claim records its start
	// (a rate-limited start, or a key's last send, from which the key's
	// next send counts), and the request must start within 50 ms of it or
	// is given back unsent (delivery.lateStartLimit, half of the 100 ms
	// store.ThrottleMargin); the other half is for the request to reach
	// the receiver, whose jitter between two requests can bring their
	// arrivals closer than their starts. herald's own starts are checked
	// tighter, to govukStartSlack. (A key's interval once counted from the
	// claim's earlier Now, then from a clock read before the rest of a busy
	// claim transaction; this test caught sends 837 and 887 ms apart. On a
	// failure it names both requests' starts as herald recorded them.)
	govukSlack      = 100 * time.Millisecond
	govukStartSlack = 50*time.Millisecond + time.Millisecond // lateness + the record's ms truncation
	// govukRateWindow is the window in which the receiver may see at most
	// rate_limit.max arrivals: the store spaces starts over 1 s + 100 ms
	// (store.ThrottleMargin), so arrivals keep to 1 s less 50 ms with room.
	govukRateWindow = govukInterval - 50*time.Millisecond
)

// discoveryEngine is the stand-in receiver: per document, the arrival
// times and versions; every arrival, for the rate check; and what broke
// the rules.
type discoveryEngine struct {
	mu         sync.Mutex
	docs       map[string]*docUpdates
	arrivals   []time.Time
	violations []string
	// close are the pairs of deliveries (webhook-id) of one document that
	// arrived less than the interval apart, with their arrival gap: within
	// the slack, herald's recorded starts decide.
	close   []closePair
	repeats int
}

type closePair struct {
	key        string
	ids        [2]string
	versions   [2]int64
	arrivalGap time.Duration
}

type docUpdates struct {
	at         []time.Time
	versions   []int64
	deliveries []string
	highest    int64
}

func (d *discoveryEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(r.Body)
	var ev struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Key     string `json:"key"`
		Version *int64 `json:"version"`
		Data    struct {
			ContentID      string `json:"content_id"`
			PayloadVersion int64  `json:"payload_version"`
		} `json:"data"`
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.arrivals = append(d.arrivals, now)
	if err := json.Unmarshal(body, &ev); err != nil || ev.Version == nil || ev.Key == "" {
		d.violations = append(d.violations, fmt.Sprintf("unreadable update (%v): %.200s", err, body))
		w.WriteHeader(http.StatusOK)
		return
	}
	if ev.Key != ev.Data.ContentID || *ev.Version != ev.Data.PayloadVersion || ev.Type != "content.updated" {
		d.violations = append(d.violations, fmt.Sprintf("mapping: %s has key %q version %d type %q for content_id %q payload_version %d",
			ev.ID, ev.Key, *ev.Version, ev.Type, ev.Data.ContentID, ev.Data.PayloadVersion))
	}
	doc := d.docs[ev.Key]
	if doc == nil {
		doc = &docUpdates{}
		d.docs[ev.Key] = doc
	}
	if n := len(doc.at); n > 0 {
		if gap := now.Sub(doc.at[n-1]); gap < govukInterval {
			if gap < govukInterval-govukSlack {
				d.violations = append(d.violations, fmt.Sprintf("%s updated twice within %v (versions %d then %d)",
					ev.Key, gap.Round(time.Millisecond), doc.versions[n-1], *ev.Version))
			}
			d.close = append(d.close, closePair{key: ev.Key, ids: [2]string{doc.deliveries[n-1], r.Header.Get("webhook-id")},
				versions: [2]int64{doc.versions[n-1], *ev.Version}, arrivalGap: gap})
		}
		switch {
		case *ev.Version < doc.highest:
			d.violations = append(d.violations, fmt.Sprintf("%s got version %d after version %d", ev.Key, *ev.Version, doc.highest))
		case *ev.Version == doc.highest:
			d.repeats++ // the same version again: harmless, counted
		}
	}
	doc.at = append(doc.at, now)
	doc.versions = append(doc.versions, *ev.Version)
	doc.deliveries = append(doc.deliveries, r.Header.Get("webhook-id"))
	doc.highest = max(doc.highest, *ev.Version)
	w.WriteHeader(http.StatusOK)
}

// TestSourceGovUK runs the GOV.UK case on one herald node on SQLite and
// on two nodes on PostgreSQL consuming the same queue (competing
// consumers).
func TestSourceGovUK(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	for _, v := range []struct {
		backend string
		nodes   int
	}{{"sqlite", 1}, {"postgres", 2}} {
		t.Run(v.backend, func(t *testing.T) {
			t.Parallel()
			runGovUK(t, v.backend, v.nodes)
		})
	}
}

func runGovUK(t *testing.T, backend string, nodes int) {
	start := time.Now()
	amqpURL := testbroker.URL(t, testbroker.AMQP)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	exchange, queue := "herald-govuk-"+suffix, "herald-govuk-"+suffix
	declareAMQP(t, amqpURL, exchange, queue)

	de := &discoveryEngine{docs: map[string]*docUpdates{}}
	recv := httptest.NewServer(de)
	t.Cleanup(recv.Close)

	store := storeArgs(t, backend)
	var hs []*srcHerald
	for i := range nodes {
		hs = append(hs, startSrcHerald(t, store, fmt.Sprintf("govuk-%d-%s", i, suffix)))
	}
	h := hs[0]
	h.mustCall(t, http.MethodPost, "/v1/subscriptions", map[string]any{
		"url": recv.URL, "event_types": []string{"content.updated"}, "timeout_ms": 5000,
		"ordering": "latest", "key_interval_ms": govukInterval.Milliseconds(),
		"rate_limit": map[string]any{"max": govukRateMax, "per_seconds": 1},
	}, http.StatusCreated)
	b := &srcBroker{kind: testbroker.AMQP, url: amqpURL, fields: map[string]any{"queue": queue}}
	h.createSource(t, b, "publishing-api", map[string]any{
		"id": "body.id", "key": "body.content_id", "version": "body.payload_version", "type": "'content.updated'",
	})
	if nodes > 1 {
		waitFor(t, 30*time.Second, func() (bool, string) {
			st, raw := h.sourceStatus(context.Background(), "publishing-api")
			consuming := 0
			for _, n := range st.Status.Nodes {
				if n.State == "consuming" {
					consuming++
				}
			}
			return consuming == nodes, raw
		}, func(last string) string { return fmt.Sprintf("not every node consumes the source: %s", last) })
	}

	// The stand-in Publishing API: per round, every document's next
	// versions, shuffled within the document, handed to 8 publishers (each
	// its own connection) one message at a time: a document's versions
	// reach the broker within milliseconds and in no particular order.
	docs := make([]string, govukDocs)
	for i := range docs {
		docs[i] = rand.Text()[:8] + "-" + strconv.Itoa(i) // a content_id
	}
	type msg struct {
		doc     string
		version int
	}
	rng := mrand.New(mrand.NewPCG(1, uint64(time.Now().UnixNano())))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		pubMu  sync.Mutex
		pubErr error
	)
	publishers := make([]func(context.Context, [][]byte) error, govukPubs)
	for i := range publishers {
		publishers[i] = amqpPublisher(t, amqpURL, exchange, func(int) string { return "news_article.major" })
	}
	for round := range govukRounds {
		var batch []msg
		for _, d := range docs {
			vs := make([]int, govukPerRound)
			for j := range vs {
				vs[j] = round*govukPerRound + j + 1
			}
			rng.Shuffle(len(vs), func(a, b int) { vs[a], vs[b] = vs[b], vs[a] })
			for _, v := range vs {
				batch = append(batch, msg{d, v})
			}
		}
		jobs := make(chan msg)
		var wg sync.WaitGroup
		for _, publish := range publishers {
			wg.Go(func() {
				for m := range jobs {
					body := fmt.Appendf(nil, `{"id":"%s-v%d","content_id":%q,"payload_version":%d,"base_path":"/government/news/%s",`+
						`"document_type":"news_article","update_type":"major","title":"Update %d"}`, m.doc, m.version, m.doc, m.version, m.doc, m.version)
					for attempt := 0; ; attempt++ {
						err := publish(ctx, [][]byte{body})
						if err == nil {
							break
						}
						if attempt == 5 {
							pubMu.Lock()
							pubErr = err
							pubMu.Unlock()
							break
						}
					}
				}
			})
		}
		roundStart := time.Now()
		for _, m := range batch {
			jobs <- m
		}
		close(jobs)
		wg.Wait()
		t.Logf("%s: round %d (%d messages) published in %v", backend, round+1, len(batch), time.Since(roundStart).Round(time.Millisecond))
		if round < govukRounds-1 {
			time.Sleep(govukRoundStep) // the next burst comes a little later, as edits do
		}
	}
	require.NoError(t, pubErr)
	published := time.Now()
	highest := int64(govukRounds * govukPerRound)

	// Every document ends at its highest version.
	waitFor(t, 75*time.Second, func() (bool, string) {
		de.mu.Lock()
		defer de.mu.Unlock()
		behind := 0
		for _, d := range docs {
			if u := de.docs[d]; u == nil || u.versions[len(u.versions)-1] != highest {
				behind++
			}
		}
		return behind == 0, fmt.Sprintf("%d of %d documents not at version %d; %d updates received", behind, len(docs), highest, len(de.arrivals))
	}, func(last string) string {
		_, stats := h.call(ctx, http.MethodGet, "/v1/stats", nil)
		_, src := h.sourceStatus(ctx, "publishing-api")
		return fmt.Sprintf("%s\nstats: %s\nsource: %s\nlogs:\n%s", last, stats, src, h.n.logs.Tail(8<<10))
	})
	settled := time.Now()

	// Every message became an event (none rejected), shared by the nodes.
	var st sourceStatus
	waitFor(t, 30*time.Second, func() (bool, string) {
		var raw string
		st, raw = h.sourceStatus(ctx, "publishing-api")
		total := int64(0)
		for _, n := range st.Status.Nodes {
			total += n.Consumed - n.Duplicates
		}
		return total == int64(govukDocs*govukRounds*govukPerRound), raw
	}, func(last string) string { return "the source did not count every message: " + last })
	require.Zero(t, st.Status.Rejected, "no message rejected")
	perNode := []int64{}
	for _, n := range st.Status.Nodes {
		perNode = append(perNode, n.Consumed)
		require.Positive(t, n.Consumed, "node %s consumed nothing: the nodes do not compete", n.Node)
	}
	require.Len(t, st.Status.Nodes, nodes)

	de.mu.Lock()
	defer de.mu.Unlock()
	// For deliveries that arrived less than the interval apart, the
	// request starts herald recorded (attempt "at"): they tell herald's
	// spacing from the receiver's.
	for _, pair := range de.close {
		starts := make([]string, 2)
		for i, id := range pair.ids {
			_, b := h.call(ctx, http.MethodGet, "/v1/deliveries/"+id, nil)
			var d struct {
				Attempts []struct {
					At string `json:"at"`
				} `json:"attempts"`
			}
			if json.Unmarshal(b, &d) == nil && len(d.Attempts) > 0 {
				starts[i] = d.Attempts[len(d.Attempts)-1].At
			}
		}
		a, errA := time.Parse(time.RFC3339Nano, starts[0])
		b, errB := time.Parse(time.RFC3339Nano, starts[1])
		if errA != nil || errB != nil {
			de.violations = append(de.violations, fmt.Sprintf("deliveries %s and %s of %s: no recorded start (%q, %q)",
				pair.ids[0], pair.ids[1], pair.key, starts[0], starts[1]))
			continue
		}
		line := fmt.Sprintf("%s: herald started deliveries %s and %s (versions %d, %d) %v apart (%s, %s); they arrived %v apart",
			pair.key, pair.ids[0], pair.ids[1], pair.versions[0], pair.versions[1], b.Sub(a).Round(time.Millisecond),
			starts[0], starts[1], pair.arrivalGap.Round(time.Millisecond))
		if b.Sub(a) < govukInterval-govukStartSlack {
			de.violations = append(de.violations, line)
		} else {
			t.Logf("within the slack: %s", line)
		}
	}
	require.Empty(t, de.violations, "Discovery Engine's rules were broken (%d of %d updates)", len(de.violations), len(de.arrivals))

	// The subscription's rate limit: in any window of govukRateWindow, at
	// most max arrivals.
	arrivals := slices.Clone(de.arrivals)
	slices.SortFunc(arrivals, func(a, b time.Time) int { return a.Compare(b) })
	peak := 0
	for i, j := 0, 0; j < len(arrivals); j++ {
		for arrivals[j].Sub(arrivals[i]) >= govukRateWindow {
			i++
		}
		peak = max(peak, j-i+1)
	}
	require.LessOrEqual(t, peak, govukRateMax, "more than rate_limit.max updates within %v", govukRateWindow)

	minGap := time.Hour
	for _, u := range de.docs {
		for i := 1; i < len(u.at); i++ {
			minGap = min(minGap, u.at[i].Sub(u.at[i-1]))
		}
	}
	t.Logf("%s, %d node(s): %d messages → %d updates to %d documents (%d repeated a version), shortest gap for a document %v, peak %d updates per %v; per node consumed %v; all at their highest version %.1fs after the last publish; %.1fs in all",
		backend, nodes, govukDocs*govukRounds*govukPerRound, len(arrivals), len(de.docs), de.repeats, minGap.Round(time.Millisecond),
		peak, govukRateWindow, perNode, settled.Sub(published).Seconds(), time.Since(start).Seconds())
}
