package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/heraldhq/herald"
)

// PushStore is the storage contract of the Web Push service (package push):
// user agents (the router record), their channels, stored messages and
// broadcast versions. Both backends implement it; storetest.RunPush proves
// it on both. The same conventions as Store apply: ctx first, a params
// struct per method, Now in the params where time matters, herald.ErrNotFound
// / herald.ErrConflict where the contract says so, one transaction per call.
//
// Identifiers are strings in their wire form: a uaid is 32 lower-case hex
// digits, a channel id a lower-case dashed UUID. Times are kept to the
// millisecond, as in Store.
type PushStore interface {
	// PushUserGet returns a user agent's router record, or ErrNotFound.
	PushUserGet(ctx context.Context, uaid string) (*PushUser, error)
	// PushUserCreate inserts a user agent, connected to NodeID since
	// ConnectedAt. New user agents are written only at their first
	// register (autopush's deferred add). ErrConflict if the uaid exists.
	PushUserCreate(ctx context.Context, params *PushUserCreateParams) error
	// PushUserConnect records that the user agent is now connected to
	// NodeID since ConnectedAt, and sets LastConnect to Now. Optimistic:
	// ErrConflict when the stored ConnectedAt is newer than the given one
	// (another node took the user agent over after us; with Newer, also
	// when it is the same), ErrNotFound when the uaid is not stored.
	PushUserConnect(ctx context.Context, params *PushUserConnectParams) error
	// PushUserConnectMany is PushUserConnect for many user agents in one
	// statement (a node's hellos gathered while its previous statement
	// ran: issue 25's reconnect storm). Each item is decided alone by
	// PushUserConnect's rule and result i answers Connects[i]; a refused
	// item carries the record it lost to, so the caller needs no read.
	// The uaids must be distinct (CodeInvalidField, nothing changed).
	PushUserConnectMany(ctx context.Context, params *PushUserConnectManyParams) ([]PushUserConnectResult, error)
	// PushUserDisconnect clears NodeID only if the stored NodeID and
	// ConnectedAt still equal the given ones, and reports whether it did:
	// a node that finds a user agent gone (or cannot be reached) must not
	// erase a newer connection elsewhere.
	PushUserDisconnect(ctx context.Context, params *PushUserDisconnectParams) (bool, error)
	// PushUserDelete removes a user agent with its channels and stored
	// messages (uaid reset, idle drop). Deleting an absent uaid is not an
	// error.
	PushUserDelete(ctx context.Context, uaid string) error

	// PushChannelAdd registers a channel for a stored user agent.
	// Registering a channel id again replaces its KeyHash. ErrNotFound when
	// the uaid is not stored; ErrPushChannelLimit (nothing changed) when
	// MaxChannels is set, the channel is new and the user agent already
	// has MaxChannels.
	PushChannelAdd(ctx context.Context, params *PushChannelAddParams) error
	// PushChannelRemove unregisters a channel and deletes its stored
	// messages; it reports whether the channel was registered (unregister
	// is idempotent).
	PushChannelRemove(ctx context.Context, params *PushChannelRemoveParams) (bool, error)
	// PushRouteGet is the endpoint's one read per message: the router
	// record of a user agent that has ChannelID registered, with the
	// channel's KeyHash. ErrNotFound when the user agent or the channel is
	// not registered (410 to the sender).
	PushRouteGet(ctx context.Context, params *PushRouteGetParams) (*PushRoute, error)

	// PushMessageSave stores messages for one user agent. A message with a
	// Topic replaces the stored message of the same channel and topic. A
	// message whose channel is not registered (any more) is not stored and
	// its id is returned; ErrNotFound when the user agent is not stored.
	// With MaxPerUAID or MaxPerChannel set, a message that would add a row
	// beyond either cap is not stored and its id is returned in OverLimit
	// (see PushMessageSaveParams).
	PushMessageSave(ctx context.Context, params *PushMessageSaveParams) (*PushMessageSaveResult, error)
	// PushMessageList returns up to Limit stored messages of a user agent
	// that have not expired at Now: topic messages first, then the others
	// in id order (ids are time-ordered).
	PushMessageList(ctx context.Context, params *PushMessageListParams) ([]*PushMessage, error)
	// PushMessageListMany is PushMessageList for many user agents at one
	// Now and Limit (each user agent gets up to Limit), in one statement:
	// the lists by uaid, a user agent with nothing stored absent.
	PushMessageListMany(ctx context.Context, params *PushMessageListManyParams) (map[string][]*PushMessage, error)
	// PushMessageDelete deletes stored messages of a user agent by id
	// (acks, DELETE /m/{id}) and returns how many it deleted; absent ids
	// are ignored.
	PushMessageDelete(ctx context.Context, params *PushMessageDeleteParams) (int, error)
	// PushMessageDeleteMany is PushMessageDelete for many user agents in
	// one statement; count i answers Deletes[i].
	PushMessageDeleteMany(ctx context.Context, params *PushMessageDeleteManyParams) ([]int, error)

	// PushBroadcastPut sets a broadcast's version (the operator's broadcast
	// source).
	PushBroadcastPut(ctx context.Context, params *PushBroadcastPutParams) error
	// PushBroadcastList returns every broadcast id with its version.
	PushBroadcastList(ctx context.Context) (map[string]string, error)

	// PushRetentionSweep deletes, in one bounded batch each, messages
	// expired at Now and user agents whose LastConnect is before
	// IdleBefore (with their channels and messages). Callers repeat it
	// while a count equals Limit.
	PushRetentionSweep(ctx context.Context, params *PushRetentionSweepParams) (*PushRetentionSweepResult, error)
	// PushStats counts user agents, channels and stored messages (for
	// /metrics). It scans the push tables: callers must not run it per
	// request (metrics.PushStatsCollector refreshes it in the background).
	PushStats(ctx context.Context) (*PushStats, error)
}

// PushUser is a user agent's router record.
type PushUser struct {
	UAID string
	// NodeID is the id of the node the user agent is connected to (its
	// internal URL with a per-process fragment, push.NewNodeID); "" when
	// it is not connected anywhere.
	NodeID string
	// ConnectedAt identifies the connection (milliseconds since the epoch,
	// unique per uaid in practice): the optimistic lock of connect and
	// disconnect.
	ConnectedAt int64
	// LastConnect is when the user agent last connected (idle expiry).
	LastConnect time.Time
}

// PushUserCreateParams are the arguments of PushUserCreate.
type PushUserCreateParams struct {
	UAID        string
	NodeID      string
	ConnectedAt int64
	Now         time.Time
}

// PushUserConnectParams are the arguments of PushUserConnect.
type PushUserConnectParams struct {
	UAID        string
	NodeID      string
	ConnectedAt int64
	Now         time.Time
	// Newer is set by a new session (hello): it takes the record only
	// from an older stamp, so one from the same millisecond is another
	// session's and refused (ErrConflict), and the caller decides. Unset,
	// a session re-asserting its own record also matches its own stamp.
	Newer bool
}

// StampBound is the newest stored connected_at this connect replaces:
// the one rule both backends' conditional UPDATE applies.
func (p *PushUserConnectParams) StampBound() int64 {
	if p.Newer {
		return p.ConnectedAt - 1
	}
	return p.ConnectedAt
}

// PushUserConnectManyParams are the arguments of PushUserConnectMany.
type PushUserConnectManyParams struct {
	// Connects are PushUserConnect's arguments, one per user agent.
	Connects []*PushUserConnectParams
}

// PushUserConnectResult answers one item of PushUserConnectMany.
type PushUserConnectResult struct {
	// Err is nil when the record now names the item's connection,
	// herald.ErrConflict when it was refused, herald.ErrNotFound when the
	// uaid is not stored: PushUserConnect's answers.
	Err error
	// NodeID and ConnectedAt are the stored record when refused
	// (ErrConflict): the connection that holds the user agent.
	NodeID      string
	ConnectedAt int64
}

// PushConnectOutcome is the answer both backends give for one connect:
// whether the uaid is stored and whether the conditional update took it.
func PushConnectOutcome(found, connected bool) error {
	switch {
	case connected:
		return nil
	case found:
		return herald.ErrConflict
	default:
		return herald.ErrNotFound
	}
}

// PushConnectsDistinct is PushUserConnectMany's check of its input: one
// statement cannot apply two connects of one row by the same rule.
func PushConnectsDistinct(connects []*PushUserConnectParams) error {
	seen := make(map[string]struct{}, len(connects))
	for _, c := range connects {
		if _, dup := seen[c.UAID]; dup {
			return herald.FieldErrorf(herald.CodeInvalidField, "uaid", "uaid %s appears twice in one connect batch", c.UAID)
		}
		seen[c.UAID] = struct{}{}
	}
	return nil
}

// PushUserDisconnectParams are the arguments of PushUserDisconnect.
type PushUserDisconnectParams struct {
	UAID        string
	NodeID      string
	ConnectedAt int64
}

// PushChannelAddParams are the arguments of PushChannelAdd.
type PushChannelAddParams struct {
	UAID      string
	ChannelID string
	// KeyHash is the SHA-256 of the application server key the channel was
	// registered with (a v2 endpoint), nil without one.
	KeyHash []byte
	Now     time.Time
	// MaxChannels caps the channels of one user agent (0: no cap). A
	// channel registered again is not a new one and always passes.
	MaxChannels int
}

// ErrPushChannelLimit: PushChannelAdd refused a new channel because the
// user agent has PushChannelAddParams.MaxChannels already.
var ErrPushChannelLimit = errors.New("push: the user agent has the most channels allowed")

// PushChannelRemoveParams are the arguments of PushChannelRemove.
type PushChannelRemoveParams struct {
	UAID      string
	ChannelID string
}

// PushRouteGetParams are the arguments of PushRouteGet.
type PushRouteGetParams struct {
	UAID      string
	ChannelID string
}

// PushRoute is what the endpoint needs to route one message.
type PushRoute struct {
	PushUser
	KeyHash []byte
}

// PushMessage is a stored (or routed) push message. The payload is kept
// verbatim: herald never decrypts it.
type PushMessage struct {
	// ID is herald.NewID(herald.PrefixPushMessage): time-ordered.
	ID        string
	UAID      string
	ChannelID string
	// Topic is "" for a message without one.
	Topic string
	// Data is the request body, nil when empty.
	Data []byte
	// Headers are the crypto headers as sent to the user agent (keys
	// encoding, encryption, crypto_key); nil without a body.
	Headers map[string]string
	// TTL in seconds, after capping.
	TTL       int
	CreatedAt time.Time
	// ExpiresAt is CreatedAt + TTL: the message is never delivered at or
	// after it.
	ExpiresAt time.Time
}

// PushMessageSaveParams are the arguments of PushMessageSave.
type PushMessageSaveParams struct {
	UAID     string
	Messages []*PushMessage
	// MaxPerUAID and MaxPerChannel cap the messages stored for the user
	// agent and for each of its channels (0: no cap). Every stored row
	// counts, expired ones not yet swept included, so the caps bound the
	// disk a user agent can hold. A topic message that replaces a stored
	// one of its channel and topic adds no row and always passes. The
	// endpoint sets them; messages of a closing session (already written
	// to the user agent) are saved without them.
	MaxPerUAID    int
	MaxPerChannel int
}

// PushMessageSaveResult answers PushMessageSave.
type PushMessageSaveResult struct {
	// Unregistered names the messages not stored because their channel is
	// not registered.
	Unregistered []string
	// OverLimit names the messages not stored because a cap of
	// PushMessageSaveParams was reached.
	OverLimit []string
}

// PushMessageCapped is the rule both backends apply to each new row: it
// breaks a cap when the user agent holds uaidCount stored messages and
// its channel chanCount, under caps maxUAID and maxChannel (0: none).
// Backends count no further than a cap (a LIMIT in the counting query),
// so a check reads at most cap index entries.
func PushMessageCapped(uaidCount, chanCount, maxUAID, maxChannel int) bool {
	return (maxUAID > 0 && uaidCount >= maxUAID) || (maxChannel > 0 && chanCount >= maxChannel)
}

// PushMessageListParams are the arguments of PushMessageList.
type PushMessageListParams struct {
	UAID  string
	Now   time.Time
	Limit int
}

// PushMessageListManyParams are the arguments of PushMessageListMany.
type PushMessageListManyParams struct {
	UAIDs []string
	Now   time.Time
	// Limit bounds each user agent's list (default 10, as PushMessageList).
	Limit int
}

// PushMessageDeleteManyParams are the arguments of PushMessageDeleteMany.
type PushMessageDeleteManyParams struct {
	Deletes []*PushMessageDeleteParams
}

// PushMessageDeleteParams are the arguments of PushMessageDelete.
type PushMessageDeleteParams struct {
	UAID string
	IDs  []string
}

// PushBroadcastPutParams are the arguments of PushBroadcastPut.
type PushBroadcastPutParams struct {
	ID      string
	Version string
	Now     time.Time
}

// PushRetentionSweepParams are the arguments of PushRetentionSweep.
type PushRetentionSweepParams struct {
	Now        time.Time
	IdleBefore time.Time
	// Limit bounds each kind of deletion (default RetentionScanRows).
	Limit int
}

// PushRetentionSweepResult counts what a sweep deleted.
type PushRetentionSweepResult struct {
	Messages int
	Users    int
}

// PushStats are the push service's counts.
type PushStats struct {
	Users    int64
	Channels int64
	Messages int64
}

// PushHeadersEncode is how both backends store PushMessage.Headers: JSON
// text, nil (NULL) for none.
func PushHeadersEncode(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// PushHeadersDecode reverses PushHeadersEncode ("" or NULL: nil).
func PushHeadersDecode(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	return h, nil
}

// NullIfEmpty maps "" and empty byte slices to nil (SQL NULL): how the
// backends store an absent topic, key hash or body.
func NullIfEmpty[T ~string | ~[]byte](v T) any {
	if len(v) == 0 {
		return nil
	}
	return v
}
