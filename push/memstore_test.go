package push

import (
	"context"
	"slices"
	"sort"
	"sync"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// memStore is an in-memory store.PushStore following the contract, for the
// connection tests until the SQLite store is on main.
type memStore struct {
	mu         sync.Mutex
	users      map[string]*store.PushUser
	channels   map[string]map[string][]byte // uaid → chid → key hash
	messages   map[string][]*store.PushMessage
	broadcasts map[string]string
}

var _ store.PushStore = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{
		users:      map[string]*store.PushUser{},
		channels:   map[string]map[string][]byte{},
		messages:   map[string][]*store.PushMessage{},
		broadcasts: map[string]string{},
	}
}

func (s *memStore) PushUserGet(_ context.Context, uaid string) (*store.PushUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[uaid]
	if !ok {
		return nil, herald.ErrNotFound
	}
	cp := *u
	return &cp, nil
}

func (s *memStore) PushUserCreate(_ context.Context, p *store.PushUserCreateParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[p.UAID]; ok {
		return herald.ErrConflict
	}
	s.users[p.UAID] = &store.PushUser{UAID: p.UAID, NodeID: p.NodeID, ConnectedAt: p.ConnectedAt, LastConnect: p.Now}
	return nil
}

func (s *memStore) PushUserConnect(_ context.Context, p *store.PushUserConnectParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[p.UAID]
	if !ok {
		return herald.ErrNotFound
	}
	if u.ConnectedAt > p.ConnectedAt {
		return herald.ErrConflict
	}
	u.NodeID, u.ConnectedAt, u.LastConnect = p.NodeID, p.ConnectedAt, p.Now
	return nil
}

func (s *memStore) PushUserDisconnect(_ context.Context, p *store.PushUserDisconnectParams) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[p.UAID]
	if !ok || u.NodeID != p.NodeID || u.ConnectedAt != p.ConnectedAt {
		return false, nil
	}
	u.NodeID = ""
	return true, nil
}

func (s *memStore) PushUserDelete(_ context.Context, uaid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.users, uaid)
	delete(s.channels, uaid)
	delete(s.messages, uaid)
	return nil
}

func (s *memStore) PushChannelAdd(_ context.Context, p *store.PushChannelAddParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[p.UAID]; !ok {
		return herald.ErrNotFound
	}
	if s.channels[p.UAID] == nil {
		s.channels[p.UAID] = map[string][]byte{}
	}
	s.channels[p.UAID][p.ChannelID] = p.KeyHash
	return nil
}

func (s *memStore) PushChannelRemove(_ context.Context, p *store.PushChannelRemoveParams) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.channels[p.UAID][p.ChannelID]
	delete(s.channels[p.UAID], p.ChannelID)
	s.messages[p.UAID] = slices.DeleteFunc(s.messages[p.UAID], func(m *store.PushMessage) bool { return m.ChannelID == p.ChannelID })
	return ok, nil
}

func (s *memStore) PushRouteGet(_ context.Context, p *store.PushRouteGetParams) (*store.PushRoute, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[p.UAID]
	if !ok {
		return nil, herald.ErrNotFound
	}
	kh, ok := s.channels[p.UAID][p.ChannelID]
	if !ok {
		return nil, herald.ErrNotFound
	}
	return &store.PushRoute{PushUser: *u, KeyHash: kh}, nil
}

func (s *memStore) PushMessageSave(_ context.Context, p *store.PushMessageSaveParams) (*store.PushMessageSaveResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[p.UAID]; !ok {
		return nil, herald.ErrNotFound
	}
	res := &store.PushMessageSaveResult{}
	for _, m := range p.Messages {
		if _, ok := s.channels[p.UAID][m.ChannelID]; !ok {
			res.Unregistered = append(res.Unregistered, m.ID)
			continue
		}
		cp := *m
		cp.UAID = p.UAID
		if m.Topic != "" {
			s.messages[p.UAID] = slices.DeleteFunc(s.messages[p.UAID], func(o *store.PushMessage) bool {
				return o.ChannelID == m.ChannelID && o.Topic == m.Topic
			})
		}
		s.messages[p.UAID] = append(s.messages[p.UAID], &cp)
	}
	return res, nil
}

func (s *memStore) PushMessageList(_ context.Context, p *store.PushMessageListParams) ([]*store.PushMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*store.PushMessage
	for _, m := range s.messages[p.UAID] {
		if p.Now.Before(m.ExpiresAt) {
			cp := *m
			out = append(out, &cp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].Topic != "", out[j].Topic != ""
		if ti != tj {
			return ti
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

func (s *memStore) PushMessageDelete(_ context.Context, p *store.PushMessageDeleteParams) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	s.messages[p.UAID] = slices.DeleteFunc(s.messages[p.UAID], func(m *store.PushMessage) bool {
		if slices.Contains(p.IDs, m.ID) {
			n++
			return true
		}
		return false
	})
	return n, nil
}

func (s *memStore) PushBroadcastPut(_ context.Context, p *store.PushBroadcastPutParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broadcasts[p.ID] = p.Version
	return nil
}

func (s *memStore) PushBroadcastList(context.Context) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.broadcasts))
	for k, v := range s.broadcasts {
		out[k] = v
	}
	return out, nil
}

func (s *memStore) PushRetentionSweep(context.Context, *store.PushRetentionSweepParams) (*store.PushRetentionSweepResult, error) {
	return &store.PushRetentionSweepResult{}, nil
}

func (s *memStore) PushStats(context.Context) (*store.PushStats, error) {
	return &store.PushStats{}, nil
}
