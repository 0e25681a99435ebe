package push

// This file holds a session's channel cache: the channels known registered
// in the session, so the endpoint routes to it without a store read.

// maxKnownChannels bounds a session's channel cache (a browser has a few
// dozen subscriptions at most; beyond the bound routes are read from the
// store).
const maxKnownChannels = 256

// channelCache is the channels known registered in one session (chid →
// key hash, nil for none): filled by register and by the endpoint's route
// reads, emptied by unregister; nil until first used, at most
// maxKnownChannels.
//
// It has no lock of its own: it is guarded by its conn's mu, because the
// endpoint's lookup must see the session's state and the cache in one
// critical section (knownChannel). Its methods are the only way to it; the
// endpoint reaches it through hub.knownRoute and hub.learnRoute.
type channelCache struct {
	keys map[string][]byte
	// gen counts forgets: a route read from the store is remembered only
	// if no register or unregister ran since the read began (it may have
	// seen the channel as it was before).
	gen uint64
}

// lookup returns chid's key hash if chid is known registered.
func (cc *channelCache) lookup(chid string) (keyHash []byte, ok bool) {
	keyHash, ok = cc.keys[chid]
	return keyHash, ok
}

// remember records that chid is registered with keyHash; a new channel is
// not recorded once the cache is full.
func (cc *channelCache) remember(chid string, keyHash []byte) {
	if cc.keys == nil {
		cc.keys = map[string][]byte{}
	}
	if _, ok := cc.keys[chid]; ok || len(cc.keys) < maxKnownChannels {
		cc.keys[chid] = keyHash
	}
}

// forget drops chid and starts a new generation.
func (cc *channelCache) forget(chid string) {
	delete(cc.keys, chid)
	cc.gen++
}

// stale reports whether a route read that began at generation gen may
// predate a register or unregister (see gen).
func (cc *channelCache) stale(gen uint64) bool {
	return cc.gen != gen
}

// learn is remember for a route read from the store that began at
// generation gen: nothing is recorded when the read may be stale.
func (cc *channelCache) learn(gen uint64, chid string, keyHash []byte) {
	if !cc.stale(gen) {
		cc.remember(chid, keyHash)
	}
}

// rememberChannel records that chid is registered with keyHash.
func (c *conn) rememberChannel(chid string, keyHash []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.channels.remember(chid, keyHash)
}

func (c *conn) forgetChannel(chid string) {
	c.mu.Lock()
	c.channels.forget(chid)
	c.mu.Unlock()
}

// learnChannel is rememberChannel for a route read from the store that
// began at generation gen.
func (c *conn) learnChannel(gen uint64, chid string, keyHash []byte) {
	// The check and the record share one critical section: with a lock
	// release between them, an unregister landing there would be undone by
	// the record, and the endpoint would route to a forgotten channel.
	c.mu.Lock()
	defer c.mu.Unlock()
	c.channels.learn(gen, chid, keyHash)
}

// knownChannel reports whether chid is known registered, with its key
// hash, while the session can take deliveries; gen is the channel
// generation for learnChannel when it is not.
func (c *conn) knownChannel(chid string) (keyHash []byte, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stateReady || c.reset {
		return nil, false, c.channels.gen
	}
	kh, ok := c.channels.lookup(chid)
	return kh, ok, c.channels.gen
}
