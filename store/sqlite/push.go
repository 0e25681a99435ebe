package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

var _ store.PushStore = (*Store)(nil)

// PushUserGet returns a user agent's router record, or ErrNotFound.
func (s *Store) PushUserGet(ctx context.Context, uaid string) (*store.PushUser, error) {
	u := &store.PushUser{UAID: uaid}
	var last int64
	err := s.rdb.QueryRowContext(ctx, `SELECT node_id, connected_at, last_connect FROM push_users WHERE uaid = ?`, uaid).
		Scan(&u.NodeID, &u.ConnectedAt, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: push user get: %w", unavailable(err))
	}
	u.LastConnect = fromMS(last)
	return u, nil
}

// PushUserCreate inserts a user agent; ErrConflict if it exists.
func (s *Store) PushUserCreate(ctx context.Context, p *store.PushUserCreateParams) error {
	return s.writeTx(ctx, "push user create", func(tx queryer) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO push_users (uaid, node_id, connected_at, last_connect)
			VALUES (?, ?, ?, ?) ON CONFLICT (uaid) DO NOTHING`, p.UAID, p.NodeID, p.ConnectedAt, ms(p.Now))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return herald.ErrConflict
		}
		return nil
	})
}

// PushUserConnect records a connection if no newer one is recorded: a
// batch of one.
func (s *Store) PushUserConnect(ctx context.Context, p *store.PushUserConnectParams) error {
	res, err := s.PushUserConnectMany(ctx, &store.PushUserConnectManyParams{Connects: []*store.PushUserConnectParams{p}})
	if err != nil {
		return err
	}
	return res[0].Err
}

// PushUserConnectMany applies many connects in one write transaction:
// per item the conditional update, and the record read only when it was
// refused.
func (s *Store) PushUserConnectMany(ctx context.Context, p *store.PushUserConnectManyParams) ([]store.PushUserConnectResult, error) {
	if err := store.PushConnectsDistinct(p.Connects); err != nil {
		return nil, err
	}
	if len(p.Connects) == 0 {
		return nil, nil
	}
	out := make([]store.PushUserConnectResult, len(p.Connects))
	err := s.queueTx(ctx, "push user connect", func(tx queryer) error {
		for i, c := range p.Connects {
			res, err := tx.ExecContext(ctx, `UPDATE push_users SET node_id = ?, connected_at = ?, last_connect = ?
				WHERE uaid = ? AND connected_at <= ?`, c.NodeID, c.ConnectedAt, ms(c.Now), c.UAID, c.StampBound())
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				continue // out[i] is the zero result: connected
			}
			r := store.PushUserConnectResult{}
			err = tx.QueryRowContext(ctx, `SELECT node_id, connected_at FROM push_users WHERE uaid = ?`, c.UAID).Scan(&r.NodeID, &r.ConnectedAt)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			r.Err = store.PushConnectOutcome(err == nil, false)
			out[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PushUserDisconnect clears node_id if the record still names this
// connection.
func (s *Store) PushUserDisconnect(ctx context.Context, p *store.PushUserDisconnectParams) (bool, error) {
	var cleared bool
	err := s.queueTx(ctx, "push user disconnect", func(tx queryer) error {
		res, err := tx.ExecContext(ctx, `UPDATE push_users SET node_id = ''
			WHERE uaid = ? AND node_id = ? AND connected_at = ?`, p.UAID, p.NodeID, p.ConnectedAt)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		cleared = n > 0
		return nil
	})
	return cleared, err
}

// PushUserDelete removes a user agent with its channels and messages.
func (s *Store) PushUserDelete(ctx context.Context, uaid string) error {
	return s.writeTx(ctx, "push user delete", func(tx queryer) error {
		return deletePushUsers(ctx, tx, []string{uaid})
	})
}

func deletePushUsers(ctx context.Context, tx queryer, uaids []string) error {
	if len(uaids) == 0 {
		return nil
	}
	in := placeholders(len(uaids))
	args := anySlice(uaids)
	for _, q := range []string{
		`DELETE FROM push_messages WHERE uaid IN (` + in + `)`,
		`DELETE FROM push_channels WHERE uaid IN (` + in + `)`,
		`DELETE FROM push_users WHERE uaid IN (` + in + `)`,
	} {
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// PushChannelAdd registers a channel (again: replaces its key hash).
func (s *Store) PushChannelAdd(ctx context.Context, p *store.PushChannelAddParams) error {
	return s.writeTx(ctx, "push channel add", func(tx queryer) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM push_users WHERE uaid = ?`, p.UAID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return herald.ErrNotFound
		}
		if err != nil {
			return err
		}
		if p.MaxChannels > 0 {
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM push_channels WHERE uaid = ? AND channel_id = ?`, p.UAID, p.ChannelID).Scan(&one)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				n, err := countCapped(ctx, tx, p.MaxChannels, `SELECT 1 FROM push_channels WHERE uaid = ?`, p.UAID)
				if err != nil {
					return err
				}
				if n >= p.MaxChannels {
					return store.ErrPushChannelLimit
				}
			case err != nil:
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO push_channels (uaid, channel_id, key_hash, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (uaid, channel_id) DO UPDATE SET key_hash = excluded.key_hash`,
			p.UAID, p.ChannelID, store.NullIfEmpty(p.KeyHash), ms(p.Now))
		return err
	})
}

// PushChannelRemove unregisters a channel and deletes its messages.
func (s *Store) PushChannelRemove(ctx context.Context, p *store.PushChannelRemoveParams) (bool, error) {
	var existed bool
	err := s.writeTx(ctx, "push channel remove", func(tx queryer) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM push_channels WHERE uaid = ? AND channel_id = ?`, p.UAID, p.ChannelID)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		existed = n > 0
		_, err = tx.ExecContext(ctx, `DELETE FROM push_messages WHERE uaid = ? AND channel_id = ?`, p.UAID, p.ChannelID)
		return err
	})
	return existed, err
}

// PushRouteGet reads the router record of a registered channel.
func (s *Store) PushRouteGet(ctx context.Context, p *store.PushRouteGetParams) (*store.PushRoute, error) {
	r := &store.PushRoute{PushUser: store.PushUser{UAID: p.UAID}}
	var last int64
	err := s.rdb.QueryRowContext(ctx, `SELECT u.node_id, u.connected_at, u.last_connect, c.key_hash
		FROM push_channels c JOIN push_users u ON u.uaid = c.uaid
		WHERE c.uaid = ? AND c.channel_id = ?`, p.UAID, p.ChannelID).Scan(&r.NodeID, &r.ConnectedAt, &last, &r.KeyHash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herald.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: push route get: %w", unavailable(err))
	}
	r.LastConnect = fromMS(last)
	if len(r.KeyHash) == 0 {
		r.KeyHash = nil
	}
	return r, nil
}

// PushMessageSave stores messages of one user agent.
func (s *Store) PushMessageSave(ctx context.Context, p *store.PushMessageSaveParams) (*store.PushMessageSaveResult, error) {
	res := &store.PushMessageSaveResult{}
	err := s.writeTx(ctx, "push message save", func(tx queryer) error {
		res.Unregistered, res.OverLimit = nil, nil
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM push_users WHERE uaid = ?`, p.UAID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return herald.ErrNotFound
		}
		if err != nil {
			return err
		}
		// Rows counted toward the caps: the user agent's, then each
		// channel's on first use (writes are serialised, so the counts
		// stay exact through the transaction).
		uaidCount := 0
		if p.MaxPerUAID > 0 {
			if uaidCount, err = countCapped(ctx, tx, p.MaxPerUAID, `SELECT 1 FROM push_messages WHERE uaid = ?`, p.UAID); err != nil {
				return err
			}
		}
		chanCount := map[string]int{}
		registered := map[string]bool{}
		for _, m := range p.Messages {
			ok, seen := registered[m.ChannelID]
			if !seen {
				err := tx.QueryRowContext(ctx, `SELECT 1 FROM push_channels WHERE uaid = ? AND channel_id = ?`, p.UAID, m.ChannelID).Scan(&one)
				switch {
				case errors.Is(err, sql.ErrNoRows):
					ok = false
				case err != nil:
					return err
				default:
					ok = true
				}
				registered[m.ChannelID] = ok
			}
			if !ok {
				res.Unregistered = append(res.Unregistered, m.ID)
				continue
			}
			headers, err := store.PushHeadersEncode(m.Headers)
			if err != nil {
				return err
			}
			replaced := int64(0)
			if m.Topic != "" {
				r, err := tx.ExecContext(ctx, `DELETE FROM push_messages WHERE uaid = ? AND channel_id = ? AND topic = ?`,
					p.UAID, m.ChannelID, m.Topic)
				if err != nil {
					return err
				}
				replaced, _ = r.RowsAffected()
			}
			if replaced == 0 && (p.MaxPerUAID > 0 || p.MaxPerChannel > 0) {
				cc, seen := chanCount[m.ChannelID]
				if !seen && p.MaxPerChannel > 0 {
					if cc, err = countCapped(ctx, tx, p.MaxPerChannel, `SELECT 1 FROM push_messages WHERE uaid = ? AND channel_id = ?`,
						p.UAID, m.ChannelID); err != nil {
						return err
					}
				}
				if store.PushMessageCapped(uaidCount, cc, p.MaxPerUAID, p.MaxPerChannel) {
					res.OverLimit = append(res.OverLimit, m.ID)
					continue
				}
				uaidCount++
				chanCount[m.ChannelID] = cc + 1
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO push_messages
				(uaid, id, channel_id, topic, data, headers, ttl, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (uaid, id) DO NOTHING`,
				p.UAID, m.ID, m.ChannelID, store.NullIfEmpty(m.Topic), store.NullIfEmpty(m.Data), headers, m.TTL, ms(m.CreatedAt), ms(m.ExpiresAt)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// countCapped counts the rows of query (a SELECT 1 …) up to limit: a
// countCapped counts the rows of query (a SELECT 1 …) up to limit: a
// cap's check reads no more than the cap's worth of index entries.
func countCapped(ctx context.Context, tx queryer, limit int, query string, args ...any) (int, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (`+query+` LIMIT ?)`, append(args, limit)...).Scan(&n)
	return n, err
}

// PushMessageList returns unexpired stored messages, topic ones first.
func (s *Store) PushMessageList(ctx context.Context, p *store.PushMessageListParams) ([]*store.PushMessage, error) {
	return s.pushMessageList(ctx, p.UAID, p.Now, p.Limit)
}

// PushMessageListMany lists many user agents' messages: in process, a
// query per uaid costs no round trip.
func (s *Store) PushMessageListMany(ctx context.Context, p *store.PushMessageListManyParams) (map[string][]*store.PushMessage, error) {
	out := map[string][]*store.PushMessage{}
	for _, uaid := range p.UAIDs {
		msgs, err := s.pushMessageList(ctx, uaid, p.Now, p.Limit)
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			out[uaid] = msgs
		}
	}
	return out, nil
}

func (s *Store) pushMessageList(ctx context.Context, uaid string, now time.Time, limit int) ([]*store.PushMessage, error) {
	if limit <= 0 {
		limit = 10
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, channel_id, topic, data, headers, ttl, created_at, expires_at
		FROM push_messages WHERE uaid = ? AND expires_at > ?
		ORDER BY topic IS NULL, id LIMIT ?`, uaid, ms(now), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: push message list: %w", unavailable(err))
	}
	defer rows.Close()
	var out []*store.PushMessage
	for rows.Next() {
		m := &store.PushMessage{UAID: uaid}
		var topic, headers sql.NullString
		var created, expires int64
		if err := rows.Scan(&m.ID, &m.ChannelID, &topic, &m.Data, &headers, &m.TTL, &created, &expires); err != nil {
			return nil, fmt.Errorf("sqlite: push message list: %w", unavailable(err))
		}
		m.Topic = topic.String
		m.CreatedAt, m.ExpiresAt = fromMS(created), fromMS(expires)
		if len(m.Data) == 0 {
			m.Data = nil
		}
		if m.Headers, err = store.PushHeadersDecode([]byte(headers.String)); err != nil {
			return nil, fmt.Errorf("sqlite: push message list: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: push message list: %w", unavailable(err))
	}
	return out, nil
}

// PushMessageDelete deletes stored messages by id: a batch of one.
func (s *Store) PushMessageDelete(ctx context.Context, p *store.PushMessageDeleteParams) (int, error) {
	n, err := s.PushMessageDeleteMany(ctx, &store.PushMessageDeleteManyParams{Deletes: []*store.PushMessageDeleteParams{p}})
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// PushMessageDeleteMany deletes many user agents' messages in one write
// transaction. An id named twice is deleted, and counted, once.
func (s *Store) PushMessageDeleteMany(ctx context.Context, p *store.PushMessageDeleteManyParams) ([]int, error) {
	out := make([]int, len(p.Deletes))
	some := false
	for _, d := range p.Deletes {
		some = some || len(d.IDs) > 0
	}
	if !some {
		return out, nil
	}
	err := s.queueTx(ctx, "push message delete", func(tx queryer) error {
		for i, d := range p.Deletes {
			if len(d.IDs) == 0 {
				continue
			}
			args := append([]any{d.UAID}, anySlice(d.IDs)...)
			res, err := tx.ExecContext(ctx, `DELETE FROM push_messages WHERE uaid = ? AND id IN (`+placeholders(len(d.IDs))+`)`, args...)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			out[i] = int(n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PushBroadcastPut sets a broadcast's version.
func (s *Store) PushBroadcastPut(ctx context.Context, p *store.PushBroadcastPutParams) error {
	return s.writeTx(ctx, "push broadcast put", func(tx queryer) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO push_broadcasts (id, version, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at`,
			p.ID, p.Version, ms(p.Now))
		return err
	})
}

// PushBroadcastList returns every broadcast version.
func (s *Store) PushBroadcastList(ctx context.Context) (map[string]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, version FROM push_broadcasts`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: push broadcast list: %w", unavailable(err))
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, v string
		if err := rows.Scan(&id, &v); err != nil {
			return nil, fmt.Errorf("sqlite: push broadcast list: %w", unavailable(err))
		}
		out[id] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: push broadcast list: %w", unavailable(err))
	}
	return out, nil
}

// PushRetentionSweep deletes expired messages and idle user agents, each
// bounded by Limit.
func (s *Store) PushRetentionSweep(ctx context.Context, p *store.PushRetentionSweepParams) (*store.PushRetentionSweepResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.RetentionScanRows
	}
	res := &store.PushRetentionSweepResult{}
	err := s.queueTx(ctx, "push retention sweep", func(tx queryer) error {
		*res = store.PushRetentionSweepResult{}
		r, err := tx.ExecContext(ctx, `DELETE FROM push_messages WHERE (uaid, id) IN
			(SELECT uaid, id FROM push_messages WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`, ms(p.Now), limit)
		if err != nil {
			return err
		}
		n, _ := r.RowsAffected()
		res.Messages = int(n)
		if p.IdleBefore.IsZero() {
			return nil
		}
		rows, err := tx.QueryContext(ctx, `SELECT uaid FROM push_users WHERE last_connect < ? ORDER BY last_connect LIMIT ?`,
			ms(p.IdleBefore), limit)
		if err != nil {
			return err
		}
		var idle []string
		for rows.Next() {
			var u string
			if err := rows.Scan(&u); err != nil {
				rows.Close()
				return err
			}
			idle = append(idle, u)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// Bounded statements: the IN lists stay under SQLite's variable
		// limit.
		for len(idle) > 0 {
			chunk := idle[:min(len(idle), 500)]
			idle = idle[len(chunk):]
			if err := deletePushUsers(ctx, tx, chunk); err != nil {
				return err
			}
			res.Users += len(chunk)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// PushStats counts user agents, channels and stored messages.
func (s *Store) PushStats(ctx context.Context) (*store.PushStats, error) {
	st := &store.PushStats{}
	err := s.rdb.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM push_users), (SELECT COUNT(*) FROM push_channels), (SELECT COUNT(*) FROM push_messages)`).
		Scan(&st.Users, &st.Channels, &st.Messages)
	if err != nil {
		return nil, fmt.Errorf("sqlite: push stats: %w", unavailable(err))
	}
	return st, nil
}
