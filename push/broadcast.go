package push

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/heraldhq/herald"
)

// broadcastNotFound is the value of an unknown id under "errors" in a
// broadcast reply (autopush's wording, which Firefox logs).
const broadcastNotFound = "Broadcast not found"

// What one session keeps of its broadcast subscriptions is bounded: at
// most maxSessionBroadcasts ids (Firefox follows one) holding at most
// maxSessionBroadcastBytes of id bytes; ids past either bound are answered
// but not followed. Versions cost a session nothing of its own: a known
// id's version is the registry's string, and an unknown id keeps none.
const (
	maxSessionBroadcasts     = 64
	maxSessionBroadcastBytes = 2048
)

// Broadcast limits, the same for the admin API and for user agents: ids
// look like "remote-settings/monitor_changes"; versions are opaque text
// the user agent compares for equality.
const (
	MaxBroadcastIDLen      = 128
	MaxBroadcastVersionLen = 256
)

// CheckBroadcast validates a broadcast id (1 to MaxBroadcastIDLen letters,
// digits and - _ . /) and version (1 to MaxBroadcastVersionLen printable
// characters). The admin API answers its error (400 invalid_field, naming
// the field); a user agent that sends such an id or version in hello or
// broadcast_subscribe is closed with 1002.
func CheckBroadcast(id, version string) error {
	if id == "" || len(id) > MaxBroadcastIDLen {
		return herald.FieldErrorf(herald.CodeInvalidField, "id", "broadcast id must be 1 to %d characters", MaxBroadcastIDLen)
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == '/':
		default:
			return herald.FieldErrorf(herald.CodeInvalidField, "id", "broadcast id may hold only letters, digits and - _ . /")
		}
	}
	if version == "" || len(version) > MaxBroadcastVersionLen || !herald.IsCleanText(version) || hasControl(version) {
		return herald.FieldErrorf(herald.CodeInvalidField, "version",
			"version must be 1 to %d printable characters", MaxBroadcastVersionLen)
	}
	return nil
}

func hasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// broadcastRegistry holds the broadcast versions (autopush's megaphone) of
// the store, reloaded every BroadcastPoll and whenever an operator sets one
// on this node. Sessions keep only the ids they subscribed to, with the
// version the user agent was last told, and the registry generation they
// last compared against: a ping tick whose generation is current costs one
// atomic read and no map walk.
type broadcastRegistry struct {
	mu       sync.RWMutex
	versions map[string]string
	gen      uint64 // bumped on every change of versions
}

// set replaces the versions and reports whether anything changed.
func (r *broadcastRegistry) set(v map[string]string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if maps.Equal(r.versions, v) {
		return false
	}
	r.versions = v
	r.gen++
	return true
}

// subscribe adds the ids of client (id → version the user agent knows) to
// subs and returns the reply: for known ids whose version differs, the
// current version; unknown ids under "errors" as "Broadcast not found". It
// also returns the changes of subs' earlier ids not yet sent (so a
// broadcast_subscribe flushes what the next ping tick would have sent).
// subs may be nil; the (possibly new) map is returned. client's entries
// were checked with CheckBroadcast.
func (r *broadcastRegistry) subscribe(subs map[string]string, gen *uint64, client map[string]string) (map[string]string, map[string]any) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reply := map[string]any{}
	r.deltaLocked(subs, gen, reply)
	var errs map[string]any
	idBytes := 0
	for id := range subs {
		idBytes += len(id)
	}
	for id, known := range client {
		cur, ok := r.versions[id]
		if !ok {
			if errs == nil {
				errs = map[string]any{}
			}
			errs[id] = broadcastNotFound
		}
		if subs == nil {
			subs = map[string]string{}
		}
		if _, already := subs[id]; !already {
			if len(subs) >= maxSessionBroadcasts || idBytes+len(id) > maxSessionBroadcastBytes {
				continue
			}
			idBytes += len(id)
		}
		if !ok {
			// Unlike autopush, an id unknown now stays subscribed, with no
			// version (the user agent's is not kept): an operator who
			// creates it later reaches the user agents that asked for it.
			subs[id] = ""
			continue
		}
		subs[id] = cur
		if cur != known {
			reply[id] = cur
		}
	}
	if errs != nil {
		reply["errors"] = errs
	}
	*gen = r.gen
	return subs, reply
}

// delta returns the subscribed ids whose version changed since the user
// agent was last told (updating subs), or nil.
func (r *broadcastRegistry) delta(subs map[string]string, gen *uint64) map[string]any {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if *gen == r.gen || len(subs) == 0 {
		*gen = r.gen
		return nil
	}
	out := map[string]any{}
	r.deltaLocked(subs, gen, out)
	if len(out) == 0 {
		return nil
	}
	return out
}

func (r *broadcastRegistry) deltaLocked(subs map[string]string, gen *uint64, out map[string]any) {
	if *gen != r.gen {
		for id, told := range subs {
			if cur, ok := r.versions[id]; ok && cur != told {
				subs[id] = cur
				out[id] = cur
			}
		}
	}
	*gen = r.gen
}

// loadBroadcasts reads the versions from the store.
func (h *hub) loadBroadcasts(ctx context.Context) error {
	v, err := h.store.PushBroadcastList(ctx)
	if err != nil {
		return err
	}
	if v == nil {
		v = map[string]string{}
	}
	h.bc.set(v)
	return nil
}

// pollBroadcasts reloads the versions every BroadcastPoll until the hub
// closes. Subscribed sessions send the changes on their next ping tick.
func (h *hub) pollBroadcasts() {
	defer close(h.pollDone)
	t := time.NewTicker(h.broadcastPoll)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		if err := h.loadBroadcasts(ctx); err != nil {
			h.log.Warn("push: loading broadcasts", "err", err)
		}
		cancel()
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
	}
}

// broadcastChanged reloads the broadcast versions at once; the admin
// handler calls it after PushBroadcastPut so this node's user agents get
// the change on their next ping tick (other nodes see it within
// BroadcastPoll).
func (s *Server) broadcastChanged(ctx context.Context) error {
	return s.hub.loadBroadcasts(ctx)
}
