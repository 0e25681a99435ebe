package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

var _ store.PushStore = (*Store)(nil)

// PushUserGet returns a user agent's router record, or ErrNotFound.
func (s *Store) PushUserGet(ctx context.Context, uaid string) (*store.PushUser, error) {
	const op = "error reading a push user"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	u := &store.PushUser{UAID: uaid}
	err = db.QueryRow(ctx, `SELECT node_id, connected_at, last_connect FROM push_users WHERE uaid = $1`, uaid).
		Scan(&u.NodeID, &u.ConnectedAt, &u.LastConnect)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.ErrNotFound
	}
	u.LastConnect = u.LastConnect.UTC()
	return u, mapErr(op, err)
}

// PushUserCreate inserts a user agent; ErrConflict if it exists.
func (s *Store) PushUserCreate(ctx context.Context, p *store.PushUserCreateParams) error {
	const op = "error creating a push user"
	db, err := s.db(op)
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, `INSERT INTO push_users (uaid, node_id, connected_at, last_connect)
		VALUES ($1, $2, $3, $4) ON CONFLICT (uaid) DO NOTHING`, p.UAID, p.NodeID, p.ConnectedAt, ms(p.Now))
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return herald.ErrConflict
	}
	return nil
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

// pushConnectManySQL is PushUserConnectMany in one statement. The stored
// rows are locked in uaid order first (the Sort under LockRows), so two
// nodes' batches over the same user agents wait on each other instead of
// deadlocking; the update then applies each item's bound to the locked
// (latest) stamp, and the final select answers every item, with the
// record it lost to when refused.
const pushConnectManySQL = `WITH i AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::bigint[])
		AS i(uaid, node_id, connected_at, last_connect, bound)
), l AS (
	SELECT p.uaid, p.node_id, p.connected_at FROM push_users p
	WHERE p.uaid = ANY($1::text[]) ORDER BY p.uaid FOR NO KEY UPDATE
), u AS (
	UPDATE push_users p SET node_id = i.node_id, connected_at = i.connected_at, last_connect = i.last_connect
	FROM i JOIN l ON l.uaid = i.uaid
	WHERE p.uaid = i.uaid AND l.connected_at <= i.bound
	RETURNING p.uaid
)
SELECT i.uaid, l.uaid IS NOT NULL, u.uaid IS NOT NULL, coalesce(l.node_id, ''), coalesce(l.connected_at, 0)
FROM i LEFT JOIN l ON l.uaid = i.uaid LEFT JOIN u ON u.uaid = i.uaid`

// PushUserConnectMany applies many connects in one statement.
func (s *Store) PushUserConnectMany(ctx context.Context, p *store.PushUserConnectManyParams) ([]store.PushUserConnectResult, error) {
	const op = "error recording push connections"
	if err := store.PushConnectsDistinct(p.Connects); err != nil {
		return nil, err
	}
	n := len(p.Connects)
	if n == 0 {
		return nil, nil
	}
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	uaids, nodes := make([]string, n), make([]string, n)
	stamps, bounds := make([]int64, n), make([]int64, n)
	lasts := make([]time.Time, n)
	at := make(map[string]int, n)
	for i, c := range p.Connects {
		uaids[i], nodes[i], stamps[i], lasts[i], bounds[i] = c.UAID, c.NodeID, c.ConnectedAt, ms(c.Now), c.StampBound()
		at[c.UAID] = i
	}
	rows, err := db.Query(ctx, pushConnectManySQL, uaids, nodes, stamps, lasts, bounds)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	out := make([]store.PushUserConnectResult, n)
	seen := 0
	for rows.Next() {
		var uaid, node string
		var found, connected bool
		var stamp int64
		if err := rows.Scan(&uaid, &found, &connected, &node, &stamp); err != nil {
			return nil, mapErr(op, err)
		}
		r := store.PushUserConnectResult{Err: store.PushConnectOutcome(found, connected)}
		if found && !connected {
			r.NodeID, r.ConnectedAt = node, stamp
		}
		out[at[uaid]] = r
		seen++
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	if seen != n {
		return nil, mapErr(op, fmt.Errorf("connect batch answered %d of %d user agents", seen, n))
	}
	return out, nil
}

// PushUserDisconnect clears node_id if the record still names this
// connection.
func (s *Store) PushUserDisconnect(ctx context.Context, p *store.PushUserDisconnectParams) (bool, error) {
	const op = "error clearing a push connection"
	db, err := s.db(op)
	if err != nil {
		return false, err
	}
	tag, err := db.Exec(ctx, `UPDATE push_users SET node_id = ''
		WHERE uaid = $1 AND node_id = $2 AND connected_at = $3`, p.UAID, p.NodeID, p.ConnectedAt)
	if err != nil {
		return false, mapErr(op, err)
	}
	return tag.RowsAffected() > 0, nil
}

// PushUserDelete removes a user agent; channels and messages go with it
// (ON DELETE CASCADE).
func (s *Store) PushUserDelete(ctx context.Context, uaid string) error {
	const op = "error deleting a push user"
	db, err := s.db(op)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `DELETE FROM push_users WHERE uaid = $1`, uaid)
	return mapErr(op, err)
}

// PushChannelAdd registers a channel (again: replaces its key hash). The
// foreign key refuses a channel of an absent user agent. With MaxChannels
// the user row is locked (FOR NO KEY UPDATE) while the channels are
// counted, so concurrent registers cannot pass the cap together.
func (s *Store) PushChannelAdd(ctx context.Context, p *store.PushChannelAddParams) error {
	const op = "error registering a push channel"
	const insert = `INSERT INTO push_channels (uaid, channel_id, key_hash, created_at)
		SELECT $1, $2, $3, $4 FROM push_users WHERE uaid = $1
		ON CONFLICT (uaid, channel_id) DO UPDATE SET key_hash = excluded.key_hash`
	if p.MaxChannels > 0 {
		return s.inTx(ctx, op, func(tx pgx.Tx) error {
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM push_users WHERE uaid = $1 FOR NO KEY UPDATE`, p.UAID).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return herald.ErrNotFound
			}
			if err != nil {
				return err
			}
			var exists bool
			var n int
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM push_channels WHERE uaid = $1 AND channel_id = $2),
				(SELECT count(*) FROM (SELECT 1 FROM push_channels WHERE uaid = $1 LIMIT $3) c)`,
				p.UAID, p.ChannelID, p.MaxChannels).Scan(&exists, &n); err != nil {
				return err
			}
			if !exists && n >= p.MaxChannels {
				return store.ErrPushChannelLimit
			}
			_, err = tx.Exec(ctx, insert, p.UAID, p.ChannelID, store.NullIfEmpty(p.KeyHash), ms(p.Now))
			return err
		})
	}
	db, err := s.db(op)
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, insert, p.UAID, p.ChannelID, store.NullIfEmpty(p.KeyHash), ms(p.Now))
	if err != nil {
		if isForeignKeyViolation(err) {
			return herald.ErrNotFound
		}
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return herald.ErrNotFound
	}
	return nil
}

// PushChannelRemove unregisters a channel; its messages go with it.
func (s *Store) PushChannelRemove(ctx context.Context, p *store.PushChannelRemoveParams) (bool, error) {
	const op = "error unregistering a push channel"
	db, err := s.db(op)
	if err != nil {
		return false, err
	}
	tag, err := db.Exec(ctx, `DELETE FROM push_channels WHERE uaid = $1 AND channel_id = $2`, p.UAID, p.ChannelID)
	if err != nil {
		return false, mapErr(op, err)
	}
	return tag.RowsAffected() > 0, nil
}

// PushRouteGet reads the router record of a registered channel.
func (s *Store) PushRouteGet(ctx context.Context, p *store.PushRouteGetParams) (*store.PushRoute, error) {
	const op = "error reading a push route"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	r := &store.PushRoute{PushUser: store.PushUser{UAID: p.UAID}}
	err = db.QueryRow(ctx, `SELECT u.node_id, u.connected_at, u.last_connect, c.key_hash
		FROM push_channels c JOIN push_users u ON u.uaid = c.uaid
		WHERE c.uaid = $1 AND c.channel_id = $2`, p.UAID, p.ChannelID).Scan(&r.NodeID, &r.ConnectedAt, &r.LastConnect, &r.KeyHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, herald.ErrNotFound
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	r.LastConnect = r.LastConnect.UTC()
	if len(r.KeyHash) == 0 {
		r.KeyHash = nil
	}
	return r, nil
}

// PushMessageSave stores messages of one user agent in one transaction.
// The user row is locked FOR KEY SHARE (a concurrent PushUserDelete waits)
// and each insert's foreign key locks its channel row, so no message can
// outlive its channel or user. With a cap the lock is FOR NO KEY UPDATE:
// saves of one user agent then run one at a time, so the counts stay
// exact.
func (s *Store) PushMessageSave(ctx context.Context, p *store.PushMessageSaveParams) (*store.PushMessageSaveResult, error) {
	res := &store.PushMessageSaveResult{}
	err := s.inTx(ctx, "error storing push messages", func(tx pgx.Tx) error {
		res.Unregistered, res.OverLimit = nil, nil
		capped := p.MaxPerUAID > 0 || p.MaxPerChannel > 0
		lock := `SELECT 1 FROM push_users WHERE uaid = $1 FOR KEY SHARE`
		if capped {
			lock = `SELECT 1 FROM push_users WHERE uaid = $1 FOR NO KEY UPDATE`
		}
		var one int
		err := tx.QueryRow(ctx, lock, p.UAID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return herald.ErrNotFound
		}
		if err != nil {
			return err
		}
		uaidCount := 0
		if p.MaxPerUAID > 0 {
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM push_messages WHERE uaid = $1 LIMIT $2) m`,
				p.UAID, p.MaxPerUAID).Scan(&uaidCount); err != nil {
				return err
			}
		}
		chanCount := map[string]int{}
		for _, m := range p.Messages {
			headers, err := store.PushHeadersEncode(m.Headers)
			if err != nil {
				return err
			}
			if capped {
				// Unregistered first (410 beats 429); then whether the
				// message adds a row (a topic replacement does not).
				var registered, replaces bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM push_channels WHERE uaid = $1 AND channel_id = $2),
					$3 <> '' AND EXISTS (SELECT 1 FROM push_messages WHERE uaid = $1 AND channel_id = $2 AND topic = $3)`,
					p.UAID, m.ChannelID, m.Topic).Scan(&registered, &replaces); err != nil {
					return err
				}
				if !registered {
					res.Unregistered = append(res.Unregistered, m.ID)
					continue
				}
				if !replaces {
					cc, seen := chanCount[m.ChannelID]
					if !seen && p.MaxPerChannel > 0 {
						if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM push_messages
							WHERE uaid = $1 AND channel_id = $2 LIMIT $3) m`, p.UAID, m.ChannelID, p.MaxPerChannel).Scan(&cc); err != nil {
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
			}
			var q string
			if m.Topic != "" {
				// A new message with a topic replaces the stored one.
				q = `INSERT INTO push_messages (uaid, id, channel_id, topic, data, headers, ttl, created_at, expires_at)
					SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 FROM push_channels WHERE uaid = $1 AND channel_id = $3
					ON CONFLICT (uaid, channel_id, topic) WHERE topic IS NOT NULL DO UPDATE SET
						id = excluded.id, data = excluded.data, headers = excluded.headers, ttl = excluded.ttl,
						created_at = excluded.created_at, expires_at = excluded.expires_at`
			} else {
				q = `INSERT INTO push_messages (uaid, id, channel_id, topic, data, headers, ttl, created_at, expires_at)
					SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 FROM push_channels WHERE uaid = $1 AND channel_id = $3
					ON CONFLICT (uaid, id) DO NOTHING`
			}
			tag, err := tx.Exec(ctx, q, p.UAID, m.ID, m.ChannelID, store.NullIfEmpty(m.Topic), store.NullIfEmpty(m.Data), headers,
				m.TTL, ms(m.CreatedAt), ms(m.ExpiresAt))
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				var exists bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM push_channels WHERE uaid = $1 AND channel_id = $2)`,
					p.UAID, m.ChannelID).Scan(&exists); err != nil {
					return err
				}
				if !exists {
					res.Unregistered = append(res.Unregistered, m.ID)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// pushMessageColumns are what a list reads of a stored message.
const pushMessageColumns = `id, channel_id, coalesce(topic, ''), data, headers, ttl, created_at, expires_at`

// PushMessageList returns unexpired stored messages, topic ones first: a
// list of one user agent.
func (s *Store) PushMessageList(ctx context.Context, p *store.PushMessageListParams) ([]*store.PushMessage, error) {
	out, err := s.PushMessageListMany(ctx, &store.PushMessageListManyParams{UAIDs: []string{p.UAID}, Now: p.Now, Limit: p.Limit})
	if err != nil {
		return nil, err
	}
	return out[p.UAID], nil
}

// PushMessageListMany lists many user agents' messages in one statement:
// one bounded index scan per uaid (LATERAL).
func (s *Store) PushMessageListMany(ctx context.Context, p *store.PushMessageListManyParams) (map[string][]*store.PushMessage, error) {
	const op = "error listing push messages"
	out := map[string][]*store.PushMessage{}
	if len(p.UAIDs) == 0 {
		return out, nil
	}
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 10
	}
	// A uaid named twice is listed once, as SQLite's loop does.
	rows, err := db.Query(ctx, `SELECT u.uaid, m.* FROM (SELECT DISTINCT unnest($1::text[])) AS u(uaid) CROSS JOIN LATERAL (
		SELECT `+pushMessageColumns+` FROM push_messages
		WHERE uaid = u.uaid AND expires_at > $2 ORDER BY topic IS NULL, id LIMIT $3) m`, p.UAIDs, ms(p.Now), limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		m := &store.PushMessage{}
		var headers []byte
		if err := rows.Scan(&m.UAID, &m.ID, &m.ChannelID, &m.Topic, &m.Data, &headers, &m.TTL, &m.CreatedAt, &m.ExpiresAt); err != nil {
			return nil, mapErr(op, err)
		}
		m.CreatedAt, m.ExpiresAt = m.CreatedAt.UTC(), m.ExpiresAt.UTC()
		if len(m.Data) == 0 {
			m.Data = nil
		}
		if m.Headers, err = store.PushHeadersDecode(headers); err != nil {
			return nil, mapErr(op, err)
		}
		out[m.UAID] = append(out[m.UAID], m)
	}
	return out, mapErr(op, rows.Err())
}

// PushMessageDelete deletes stored messages by id: a batch of one.
func (s *Store) PushMessageDelete(ctx context.Context, p *store.PushMessageDeleteParams) (int, error) {
	n, err := s.PushMessageDeleteMany(ctx, &store.PushMessageDeleteManyParams{Deletes: []*store.PushMessageDeleteParams{p}})
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// PushMessageDeleteMany deletes many user agents' messages in one
// statement and counts them per item.
func (s *Store) PushMessageDeleteMany(ctx context.Context, p *store.PushMessageDeleteManyParams) ([]int, error) {
	const op = "error deleting push messages"
	out := make([]int, len(p.Deletes))
	var uaids, ids []string
	var items []int32
	for i, d := range p.Deletes {
		for _, id := range d.IDs {
			uaids, ids, items = append(uaids, d.UAID), append(ids, id), append(items, int32(i))
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	// An id named twice (in one item or two of one uaid) deletes one row,
	// counted once, for the first item that names it.
	rows, err := db.Query(ctx, `WITH d AS (
		SELECT DISTINCT ON (uaid, id) uaid, id, item FROM unnest($1::text[], $2::text[], $3::int[]) AS d(uaid, id, item)
		ORDER BY uaid, id, item
	), x AS (
		DELETE FROM push_messages m USING d WHERE m.uaid = d.uaid AND m.id = d.id RETURNING m.uaid, m.id
	)
	SELECT d.item, count(*) FROM x JOIN d ON d.uaid = x.uaid AND d.id = x.id GROUP BY d.item`, uaids, ids, items)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var item int32
		var n int
		if err := rows.Scan(&item, &n); err != nil {
			return nil, mapErr(op, err)
		}
		out[item] = n
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// PushBroadcastPut sets a broadcast's version.
func (s *Store) PushBroadcastPut(ctx context.Context, p *store.PushBroadcastPutParams) error {
	const op = "error setting a push broadcast"
	db, err := s.db(op)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `INSERT INTO push_broadcasts (id, version, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at`,
		p.ID, p.Version, ms(p.Now))
	return mapErr(op, err)
}

// PushBroadcastList returns every broadcast version.
func (s *Store) PushBroadcastList(ctx context.Context) (map[string]string, error) {
	const op = "error listing push broadcasts"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT id, version FROM push_broadcasts`)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, v string
		if err := rows.Scan(&id, &v); err != nil {
			return nil, mapErr(op, err)
		}
		out[id] = v
	}
	return out, mapErr(op, rows.Err())
}

// PushRetentionSweep deletes expired messages and idle user agents, each
// bounded by Limit.
func (s *Store) PushRetentionSweep(ctx context.Context, p *store.PushRetentionSweepParams) (*store.PushRetentionSweepResult, error) {
	const op = "error sweeping push storage"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.RetentionScanRows
	}
	res := &store.PushRetentionSweepResult{}
	tag, err := db.Exec(ctx, `DELETE FROM push_messages WHERE (uaid, id) IN
		(SELECT uaid, id FROM push_messages WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)`, ms(p.Now), limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	res.Messages = int(tag.RowsAffected())
	if !p.IdleBefore.IsZero() {
		tag, err = db.Exec(ctx, `DELETE FROM push_users WHERE uaid IN
			(SELECT uaid FROM push_users WHERE last_connect < $1 ORDER BY last_connect LIMIT $2)`, ms(p.IdleBefore), limit)
		if err != nil {
			return nil, mapErr(op, err)
		}
		res.Users = int(tag.RowsAffected())
	}
	return res, nil
}

// PushStats counts user agents, channels and stored messages.
func (s *Store) PushStats(ctx context.Context) (*store.PushStats, error) {
	const op = "error counting push storage"
	db, err := s.db(op)
	if err != nil {
		return nil, err
	}
	st := &store.PushStats{}
	err = db.QueryRow(ctx, `SELECT (SELECT count(*) FROM push_users), (SELECT count(*) FROM push_channels),
		(SELECT count(*) FROM push_messages)`).Scan(&st.Users, &st.Channels, &st.Messages)
	return st, mapErr(op, err)
}

// isForeignKeyViolation reports SQLSTATE 23503: the row a foreign key
// names was deleted concurrently.
func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}
