package push

import (
	"context"
	"maps"
	"sync"
	"time"
)

// broadcastNotFound is the value of an unknown id under "errors" in a
// broadcast reply (autopush's wording, which Firefox logs).
const broadcastNotFound = "Broadcast not found"

// maxSessionBroadcasts bounds the broadcast ids one session follows
// (Firefox follows one); more are answered but not followed.
const maxSessionBroadcasts = 64

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
// subs may be nil; the (possibly new) map is returned.
func (r *broadcastRegistry) subscribe(subs map[string]string, gen *uint64, client map[string]string) (map[string]string, map[string]any) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reply := map[string]any{}
	r.deltaLocked(subs, gen, reply)
	var errs map[string]any
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
		if _, already := subs[id]; !already && len(subs) >= maxSessionBroadcasts {
			continue
		}
		if !ok {
			// Unlike autopush, an id unknown now stays subscribed with the
			// version the user agent knows: an operator who creates it
			// later reaches the user agents that asked for it.
			subs[id] = known
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
