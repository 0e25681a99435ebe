package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/heraldhq/herald"
)

// Store is the storage contract. The interface is internal to herald: it may
// change in any release.
type Store interface {
	// Migrate brings the schema to the newest embedded version. It is safe
	// to call from several processes at once (PostgreSQL serializes it with
	// an advisory lock) and refuses a schema newer than the code.
	Migrate(ctx context.Context) error
	// Ping checks that the database answers (readiness).
	Ping(ctx context.Context) error
	// Close releases connections and locks.
	Close() error

	// APITokenCreate stores the hash of an API token.
	APITokenCreate(ctx context.Context, params *APITokenCreateParams) error
	// APITokenExists reports whether a token with this hash is stored.
	APITokenExists(ctx context.Context, hash string) (bool, error)
	// APITokenGet returns the token stored with this hash, or ErrNotFound.
	// It is one primary-key read: authentication calls it on every request
	// so a revocation takes effect at once on every node.
	APITokenGet(ctx context.Context, hash string) (*APIToken, error)
	// APITokenList returns every stored token, oldest first.
	APITokenList(ctx context.Context) ([]*APIToken, error)
	// APITokenDelete removes a token (revocation). ErrNotFound if absent.
	APITokenDelete(ctx context.Context, id string) error
	// APITokenCount counts stored tokens (0 on a first start).
	APITokenCount(ctx context.Context) (int, error)

	// PortalLinkCreate stores a consumer-portal link (its token's hash) and
	// deletes links that expired more than PortalLinkRetention ago.
	PortalLinkCreate(ctx context.Context, params *PortalLinkCreateParams) error
	// PortalLinkConsume marks the unused, unexpired (ExpiresAt > Now) link
	// with this hash used at Now and returns it, atomically: of two
	// concurrent calls one wins and the other gets ErrNotFound, as does a
	// used, expired or unknown link.
	PortalLinkConsume(ctx context.Context, params *PortalLinkConsumeParams) (*PortalLink, error)
	// PortalLinkGet returns the link with this id, used or not, or
	// ErrNotFound (also once PortalLinkCreate deleted it, a day after it
	// expired): a portal tab continuing its browser's session reads the
	// theme there (ADR 0025).
	PortalLinkGet(ctx context.Context, id string) (*PortalLink, error)

	// SubscriptionCreate inserts a subscription with its first secret and
	// bumps the subscriptions version.
	SubscriptionCreate(ctx context.Context, params *SubscriptionCreateParams) (*herald.Subscription, error)
	// SubscriptionGet returns one subscription or ErrNotFound. Deleted
	// subscriptions are not found.
	SubscriptionGet(ctx context.Context, id string) (*herald.Subscription, error)
	// SubscriptionList pages through subscriptions in id order.
	SubscriptionList(ctx context.Context, params *SubscriptionListParams) (*SubscriptionListResult, error)
	// SubscriptionListAll returns every subscription (enabled or not) with
	// both versions and the pauses read in the same transaction: the
	// fan-out cache loads from it.
	SubscriptionListAll(ctx context.Context) (*SubscriptionListAllResult, error)
	// SubscriptionsVersion returns both change counters (see
	// SubscriptionsVersions) in one cheap read: the fan-out cache polls it
	// before every group commit.
	SubscriptionsVersion(ctx context.Context) (SubscriptionsVersions, error)
	// SubscriptionPauseList returns the pauses of live subscriptions with
	// the pauses version read in the same snapshot: a fan-out cache whose
	// subscriptions are current but whose pauses are not reloads only
	// these, not every subscription.
	SubscriptionPauseList(ctx context.Context) (*SubscriptionPauseListResult, error)
	// SubscriptionUpdate replaces the mutable fields of a subscription (the
	// caller merges a PATCH) and bumps the version. ErrNotFound if absent.
	SubscriptionUpdate(ctx context.Context, params *SubscriptionUpdateParams) (*herald.Subscription, error)
	// SubscriptionDelete removes a subscription and marks its pending and
	// in-flight deliveries cancelled. ErrNotFound if absent.
	SubscriptionDelete(ctx context.Context, params *SubscriptionDeleteParams) error
	// SubscriptionHealthGet returns a subscription's health
	// (store/health.go) at Now, or ErrNotFound if the subscription is
	// absent. A subscription never attempted has an empty health.
	SubscriptionHealthGet(ctx context.Context, params *SubscriptionHealthGetParams) (*herald.SubscriptionHealth, error)
	// SubscriptionSecretRotate adds a new secret and makes every older one
	// that has no earlier expiry expire at GraceUntil. ErrNotFound if absent.
	SubscriptionSecretRotate(ctx context.Context, params *SubscriptionSecretRotateParams) error
	// SubscriptionSecretList returns a subscription's secrets, newest first,
	// including expired ones. ErrNotFound if the subscription is absent.
	SubscriptionSecretList(ctx context.Context, id string) ([]herald.Secret, error)

	// ConnectionStore keeps the operator-owned broker connections
	// (store/connection.go). Subscriptions read back with Destination
	// filled; SubscriptionCreate and SubscriptionUpdate store it, and
	// refuse (ErrConnectionMissing) a destination naming a connection that
	// does not exist.
	ConnectionStore
	// SourceStore keeps the operator-owned broker sources (store/source.go).
	SourceStore
	// EventTypeStore keeps the event type catalog (store/eventtype.go).
	EventTypeStore

	// EventInsertMany stores events and their deliveries in ONE transaction:
	// either all of it commits or nothing does. An event whose key (EventKey:
	// its ID within its tenant) already exists is not stored again (nor are
	// its deliveries) and its result says Duplicate with the original
	// delivery count; a key repeated inside one call is a duplicate of its
	// first occurrence. The same ID in another tenant is another event.
	//
	// A delivery is stored only if its subscription exists and is not
	// deleted when the transaction commits (a disabled one is fine: its
	// deliveries wait for re-enabling); the others are left out and named
	// in EventInsertResult.Dropped. The check cannot race a concurrent
	// SubscriptionDelete: either the delete's cancellation sees the new
	// deliveries or the insert sees the subscription deleted (PostgreSQL
	// locks the subscription rows FOR KEY SHARE, which the delete's FOR
	// UPDATE waits for). Without it a subscription deleted between the
	// fan-out cache's load and the insert left a pending delivery no loop
	// would ever claim.
	EventInsertMany(ctx context.Context, params *EventInsertManyParams) ([]EventInsertResult, error)
	// DeliveryCreateMany stores new deliveries of events already stored to
	// one subscription (resend and replay), in ONE transaction, pending in
	// tier 0, with new publish positions in input order: a fifo or latest
	// subscription treats each as published now (store/ordering.go), so a
	// latest subscription skips a resent version older than one it already
	// delivered. The deliveries copy their event's key and version and
	// bump its delivery_count. Nothing is stored when the subscription is
	// deleted or unknown (a disabled one is fine, as in EventInsertMany,
	// with the same guard against a concurrent SubscriptionDelete); a
	// delivery whose event is not stored (retention deleted it) is left
	// out. It returns how many it stored.
	DeliveryCreateMany(ctx context.Context, params *DeliveryCreateManyParams) (int, error)
	// EventGet returns an event and its deliveries (any state), or
	// ErrNotFound.
	EventGet(ctx context.Context, params *EventGetParams) (*EventGetResult, error)
	// EventList pages through events newest first (created_at, then id),
	// with filters. It serves the operator's search, not the hot path: a
	// type or key filter is applied while walking the created_at index.
	EventList(ctx context.Context, params *EventListParams) (*EventListResult, error)

	// DeliveryGet returns a delivery with every attempt in order, or
	// ErrNotFound.
	DeliveryGet(ctx context.Context, id string) (*DeliveryGetResult, error)
	// DeliveryWaitingFor says why a delivery is not being sent at Now (see
	// WaitingFor): "" when it is not waiting (claimable now, or not
	// pending). ErrNotFound if absent.
	DeliveryWaitingFor(ctx context.Context, params *DeliveryWaitingForParams) (WaitingFor, error)
	// DeliveryList pages through deliveries newest first, with filters.
	DeliveryList(ctx context.Context, params *DeliveryListParams) (*DeliveryListResult, error)
	// DeliveryClaim leases up to Limit due pending deliveries of one tier
	// (state pending, next_attempt_at <= Now, subscription enabled) and
	// marks them in_flight with LeaseOwner/LeaseUntil. See store/claim.go
	// for the fairness rule and the lease, store/throttle.go for the
	// throttle, and store/ordering.go for the per-key ordering
	// rules of fifo and latest subscriptions (which also finish stale
	// deliveries as skipped or superseded, in the claim transaction).
	// Returned in next_attempt_at order.
	DeliveryClaim(ctx context.Context, params *DeliveryClaimParams) ([]*ClaimedDelivery, error)
	// DeliveryNextDue returns the earliest next_attempt_at among pending
	// deliveries of a tier whose subscription is enabled, or nil when there
	// are none. Workers sleep until then. Throttling (store/throttle.go)
	// is accounted for: a paused subscription counts from its paused_until,
	// a rate-limited one out of budget from when its budget returns, and
	// one at its max_in_flight not at all (a completion frees it; the
	// engine wakes then). For fifo and latest subscriptions a due keyed
	// delivery does not count either (its key is taken or it would have
	// been claimed; the completion freeing the key wakes the engine), and
	// only the first OrderedNextDueWindow due deliveries are looked at for
	// a keyless one, so the answer costs the same however many keyed
	// deliveries wait.
	DeliveryNextDue(ctx context.Context, params *DeliveryNextDueParams) (*time.Time, error)
	// DeliveryCompleteMany applies attempt outcomes in ONE transaction: each
	// outcome records its attempt and moves the delivery to its new state —
	// only if the delivery is still in_flight under the same LeaseOwner
	// (otherwise the attempt is still recorded, the state is left alone and
	// the outcome is counted in Stale). An outcome whose delivery does not
	// exist records no attempt and is counted in Stale; an invalid outcome
	// refuses the whole call with an *OutcomeError (store/complete.go). It
	// also applies subscription disables and inserts system events with
	// their deliveries, so an alert commits with the failure that caused it.
	DeliveryCompleteMany(ctx context.Context, params *DeliveryCompleteManyParams) (*DeliveryCompleteManyResult, error)
	// DeliveryRelease gives back in_flight deliveries held by Owner without
	// recording an attempt: they become pending in their tier, due at Now.
	// Used on graceful shutdown for work claimed but not started.
	DeliveryRelease(ctx context.Context, params *DeliveryReleaseParams) (int, error)
	// DeliveryRescue makes in_flight deliveries whose lease expired before
	// Now pending again in their tier, due at Now (a crashed node's work).
	DeliveryRescue(ctx context.Context, params *DeliveryRescueParams) (int, error)
	// DeliveryRescueDead makes in_flight deliveries whose lease owner is
	// known dead pending again in their tier, due at Now, whatever their
	// lease_until, with DeliveryRescue's rules otherwise. See
	// store/liveness.go for who is known dead.
	DeliveryRescueDead(ctx context.Context, params *DeliveryRescueDeadParams) (int, error)
	// NodeLivenessHold marks NodeID (this node's lease owner name) alive
	// until Close, and makes pending again, due at Now, the in_flight
	// deliveries a previous process of the same node left (see
	// store/liveness.go). Call it once at start, before leasing anything;
	// it returns how many it rescued. A NodeID held by a live process is
	// refused with ErrConflict.
	NodeLivenessHold(ctx context.Context, params *NodeLivenessHoldParams) (int, error)
	// DeliveryRetry puts one finished delivery (delivered, dead, skipped,
	// superseded, cancelled) back in tier 0, pending, due at Now.
	// ErrNotFound if absent; ErrConflict if it is pending or in flight, or
	// its subscription was deleted.
	DeliveryRetry(ctx context.Context, params *DeliveryRetryParams) (*herald.Delivery, error)
	// DeliveryCancelOrphaned marks cancelled every pending or in-flight
	// delivery whose subscription is deleted or does not exist, and returns
	// how many. Such a delivery can never be claimed; left alone it would
	// sit in a tier for good and keep its event from retention. Neither
	// EventInsertMany nor SubscriptionDelete leaves any, so this finds only
	// what a database written by an older herald (or a retry or redrive
	// racing a delete) left behind. Run it from the leader (see
	// LeaderAttempt).
	DeliveryCancelOrphaned(ctx context.Context, params *DeliveryCancelOrphanedParams) (int, error)
	// DeliveryTierClamp moves every pending or in-flight delivery of a tier
	// >= Tiers to tier Tiers-1, keeping its due time, and reports how many
	// it moved from each tier. Run on start: when the configured tiers
	// shrink, no loop claims the removed tiers, so their deliveries would
	// otherwise wait for good. An in-flight delivery that moves keeps its
	// lease (its outcome decides its next tier as before; a rescue makes it
	// pending in the last tier). Tiers < 1 is refused (see Validate) and
	// changes nothing.
	DeliveryTierClamp(ctx context.Context, params *DeliveryTierClampParams) (*DeliveryTierClampResult, error)
	// DeadLetterRedrive puts every dead delivery of a subscription that died
	// (updated_at) in [Since, Until) back in tier 0, due at Now, and returns
	// how many. Zero Since/Until mean unbounded.
	DeadLetterRedrive(ctx context.Context, params *DeadLetterRedriveParams) (int, error)
	// DeadLetterCount counts the dead deliveries DeadLetterRedrive with the
	// same params would redrive if Limit were 0.
	DeadLetterCount(ctx context.Context, params *DeadLetterRedriveParams) (int, error)
	// DeadLetterGroupList counts dead deliveries by subscription and last
	// error class, largest group first.
	DeadLetterGroupList(ctx context.Context, params *DeadLetterGroupListParams) ([]*DeadLetterGroup, error)
	// SubscriptionStatsList counts, per subscription, the deliveries that
	// finished delivered or dead at or after Since and the ones pending or
	// in flight now. Subscriptions with nothing to count are left out.
	SubscriptionStatsList(ctx context.Context, params *SubscriptionStatsListParams) ([]*SubscriptionStats, error)

	// StatsGet counts deliveries per tier and state. It reads the queue
	// (pending and in-flight rows) and counters, never the finished
	// history: dead, skipped and superseded counts are kept by the
	// database as rows change state (migration 007), so the cost does not
	// grow with retention.
	StatsGet(ctx context.Context, params *StatsGetParams) (*Stats, error)

	// RetentionSweep deletes what retention no longer keeps: finished
	// deliveries (delivered, skipped, superseded, cancelled) and dead
	// letters last updated more than their retention before Now, with their
	// attempts, then events older than the event retention that have no
	// delivery left. It never deletes a pending or in-flight delivery (nor
	// their events). It also deletes idle per-key ordering state, deleted
	// subscriptions, rotated-out secrets and orphan attempts (see
	// store/retention.go for each rule). It deletes in transactions of at
	// most BatchSize rows, so no lock is held long, and returns when nothing
	// due is left (or ctx ends) — except in key state and attempts, which it
	// scans a bounded number of rows per call (RetentionScanRows), resuming
	// at the next call. Run it from one node at a time (see LeaderAttempt);
	// running it concurrently is safe but wasteful.
	RetentionSweep(ctx context.Context, params *RetentionSweepParams) (*RetentionSweepResult, error)
	// LeaderAttempt tries to make this store's node the leader that runs
	// the maintenance services (retention, staleness alarms) and reports
	// whether it is. Call it periodically: a leader stays leader on each
	// call until LeaderRelease, Close, or losing its database session.
	// PostgreSQL holds a session advisory lock on a dedicated connection,
	// so at most one store per schema is leader, and ends a leader session
	// silent for 30 s (call LeaderAttempt more often than that); SQLite
	// (one node) is always leader.
	LeaderAttempt(ctx context.Context) (bool, error)
	// LeaderRelease gives up leadership if held (another node may take it
	// on its next LeaderAttempt).
	LeaderRelease(ctx context.Context) error
}

// Notifier is implemented by stores that wake other nodes when a commit
// creates due work (PostgreSQL LISTEN/NOTIFY). It is a hint: nodes keep
// polling, so a lost notification only delays work until the next poll.
type Notifier interface {
	// Listen calls onWork whenever another node committed due work, with
	// the tiers it committed to (TierBit), until ctx ends; it then returns
	// ctx's error. Commits through this store are not reported: the node
	// that commits wakes its own loops for them. It keeps a dedicated
	// connection and reconnects when it drops; onWork is also called once,
	// with AllTiers, each time the listener is (re)established, since
	// notifications may have been missed meanwhile. onWork must not block.
	Listen(ctx context.Context, onWork func(tiers uint64)) error
}

// AllTiers is a tiers mask (TierBit) naming every tier.
const AllTiers = ^uint64(0)

// TierBit is tier's bit in a tiers mask: bit t for tiers 0–62, bit 63 for
// tier 63 and every one above it.
func TierBit(tier int) uint64 {
	if tier < 0 || tier >= 63 {
		return 1 << 63
	}
	return 1 << tier
}

// TierIn reports whether tiers (a mask of TierBit) names tier.
func TierIn(tiers uint64, tier int) bool { return tiers&TierBit(tier) != 0 }

// Vacuumer is implemented by stores whose queue tables keep dead row
// versions until something cleans them up (PostgreSQL's MVCC). Every claim
// and completion leaves one behind; left alone they slow every claim down.
// Run it from the leader only (see LeaderAttempt).
type Vacuumer interface {
	// QueueVacuum cleans up the tables that claims and completions churn.
	// It is cheap when they are small, which is what they are meant to be
	// (finished deliveries live elsewhere).
	QueueVacuum(ctx context.Context, params *QueueVacuumParams) (*QueueVacuumResult, error)
}

// QueueVacuumParams are the inputs of QueueVacuum.
type QueueVacuumParams struct {
	// Archive cleans the tables retention deletes from (finished
	// deliveries, attempts, events) instead of the queue tables, and only
	// where the store's own background cleaner is not running. Ask for it
	// after a sweep deleted rows; it may take long on large tables, so the
	// caller runs it apart from the frequent queue vacuums.
	Archive bool
}

// QueueVacuumResult says what QueueVacuum did.
type QueueVacuumResult struct {
	// Tables are the tables it cleaned, in order.
	Tables []string
}

// APITokenCreateParams are the inputs of APITokenCreate. Storing a hash
// that is already stored is a no-op (a configured admin token is stored on
// every start).
type APITokenCreateParams struct {
	// Hash is hex(sha256(token)); the token itself is never stored.
	Hash string
	// ID defaults to "tok_" + the first 26 characters of Hash (what
	// migration 010 gave tokens stored before it); Name to "admin".
	ID, Name string
	// Scopes default to ["admin"].
	Scopes []string
	// Tenant, when set, confines the token to that tenant's data.
	Tenant string
	// ExpiresAt, when set, ends the token's validity.
	ExpiresAt *time.Time
	Now       time.Time
}

// Defaults fills ID, Name and Scopes when empty (backend helper).
func (p *APITokenCreateParams) Defaults() {
	if p.ID == "" {
		p.ID = "tok_" + p.Hash[:min(26, len(p.Hash))]
		if p.Name == "" {
			p.Name = "admin"
		}
	}
	if len(p.Scopes) == 0 {
		p.Scopes = []string{"admin"}
	}
}

// APIToken is a stored API token: everything but the token itself.
type APIToken struct {
	ID        string
	Hash      string
	Name      string
	Scopes    []string
	Tenant    string
	ExpiresAt *time.Time
	CreatedAt time.Time
}

// SubscriptionCreateParams are the inputs of SubscriptionCreate. The caller
// fills Subscription completely (ID, State, timestamps, defaults applied).
type SubscriptionCreateParams struct {
	Subscription *herald.Subscription
	Secret       string
	Now          time.Time
}

// SubscriptionListParams page through subscriptions.
type SubscriptionListParams struct {
	// Limit is at most 1000; 0 means 100.
	Limit int
	// After returns subscriptions with id > After.
	After string
	// Tenant, when set, lists only that tenant's subscriptions.
	Tenant string
}

// SubscriptionListResult is one page.
type SubscriptionListResult struct {
	Subscriptions []*herald.Subscription
	// More is true when a further page exists; the cursor is the last id.
	More bool
}

// SubscriptionsVersions are the two change counters a fan-out cache
// watches. Neither ever goes down.
//
// Pauses have their own counter because they are frequent (every 429 or
// 503 with Retry-After) and matter only to direct dispatch: if they moved
// the subscriptions version, a receiver answering 429 would make every
// node reload every subscription and recompile every filter in its commit
// path.
type SubscriptionsVersions struct {
	// Subscriptions is bumped by every change of what subscriptions exist,
	// match or sign with: create, update, delete, secret rotation, and a
	// disable (DeliveryCompleteManyParams.DisableSubscriptions) that
	// disabled an enabled subscription; disabling one already disabled
	// changes nothing and bumps nothing. Never by a pause.
	Subscriptions int64
	// Pauses is bumped by a pause that moved some subscription's
	// paused_until (DeliveryCompleteManyParams.PauseSubscriptions), and by
	// nothing else.
	Pauses int64
}

// SubscriptionListAllResult is the whole set with its versions.
type SubscriptionListAllResult struct {
	Subscriptions []*herald.Subscription
	// Version is the subscriptions version (SubscriptionsVersions) the list
	// is as of.
	Version int64
	// PausesVersion is the pauses version PausedUntil is as of.
	PausesVersion int64
	// Secrets holds every secret of the listed subscriptions (expired ones
	// included; callers filter with Secret.Active), newest first, keyed by
	// subscription id. Direct dispatch signs from it without a read.
	Secrets map[string][]herald.Secret
	// PausedUntil holds the paused_until of listed subscriptions that have
	// one (set by a Retry-After; see DeliveryCompleteManyParams).
	PausedUntil map[string]time.Time
}

// SubscriptionPauseListResult is every live subscription's pause with the
// pauses version.
type SubscriptionPauseListResult struct {
	// PausedUntil holds the paused_until of live subscriptions that have
	// one, keyed by subscription id (as SubscriptionListAllResult's).
	PausedUntil map[string]time.Time
	// Version is the pauses version (SubscriptionsVersions.Pauses) the
	// list is as of.
	Version int64
}

// SubscriptionUpdateParams carry the merged subscription; ID selects the
// row, and every mutable field (everything but ID and CreatedAt) is written.
type SubscriptionUpdateParams struct {
	Subscription *herald.Subscription
	Now          time.Time
}

// SubscriptionDeleteParams are the inputs of SubscriptionDelete.
type SubscriptionDeleteParams struct {
	ID  string
	Now time.Time
}

// SubscriptionSecretRotateParams are the inputs of SubscriptionSecretRotate.
type SubscriptionSecretRotateParams struct {
	ID         string
	NewSecret  string
	GraceUntil time.Time
	Now        time.Time
}

// EventInsertManyParams are the inputs of EventInsertMany.
type EventInsertManyParams struct {
	Events []EventInsert
	Now    time.Time
	// Versions, when set, are the SubscriptionsVersions of the fan-out
	// cache that chose Deliveries. The store compares both with its own
	// inside the insert's transaction and, when either differs, inserts
	// nothing and returns ErrSubscriptionsMoved: the caller reloads and
	// matches again. It saves the ingester the separate version read it
	// would otherwise make before every group commit (at steady rates
	// nearly one per event; issue 26), and keeps the rule that every
	// subscription change committed before the insert is matched. Nil:
	// no check.
	Versions *SubscriptionsVersions
	// Tokens, when set, are the API tokens the events were published with
	// that no read has confirmed for this request (a node's token cache,
	// ADR 0035). The store checks inside the insert's transaction that
	// every one is still stored and, when one is not, inserts nothing and
	// returns ErrTokenGone: a revoked token publishes nothing from the
	// moment its delete commits, on every node, without a token read per
	// request. Nil: no check.
	Tokens []TokenCheck
}

// TokenCheck names a stored API token by its hash and id: a token deleted
// and stored again under the same hash is another row with another id.
type TokenCheck struct {
	Hash, ID string
}

// ErrTokenGone is EventInsertMany's answer when a token of
// EventInsertManyParams.Tokens is no longer stored: nothing was stored. It
// is the API's 401 for a revoked token.
var ErrTokenGone = &herald.Error{Code: herald.CodeUnauthorized, Message: "invalid, expired or revoked API token"}

type tokenCheckKey struct{}

// WithTokenCheck returns ctx carrying the token a publish must confirm at
// its insert (EventInsertManyParams.Tokens); the API sets it for a caller
// it authenticated from its cache, and the ingester reads it.
func WithTokenCheck(ctx context.Context, t TokenCheck) context.Context {
	return context.WithValue(ctx, tokenCheckKey{}, t)
}

// TokenCheckFrom returns the token ctx carries (WithTokenCheck).
func TokenCheckFrom(ctx context.Context) (TokenCheck, bool) {
	t, ok := ctx.Value(tokenCheckKey{}).(TokenCheck)
	return t, ok
}

// ErrSubscriptionsMoved is EventInsertMany's answer when
// EventInsertManyParams.Versions is not the store's: nothing was stored.
var ErrSubscriptionsMoved = errors.New("subscriptions changed since the fan-out cache was loaded")

// EventInsert is one event with the deliveries fan-out decided for it.
type EventInsert struct {
	// Event.ID and Event.CreatedAt are set by the caller.
	Event *herald.Event
	// Deliveries: one per matching subscription.
	Deliveries []DeliveryInsert
}

// DeliveryInsert is one new delivery in tier 0: pending, or already
// leased when LeaseOwner is set.
type DeliveryInsert struct {
	// ID must be new: callers generate it (herald.NewID, random enough
	// that it never repeats). Stores reject an id they hold in the same
	// state class, but need not check every delivery ever stored:
	// PostgreSQL's key is per partition of deliveries (unfinished,
	// finished; migration 005).
	ID             string
	SubscriptionID string
	// NextAttemptAt is when tier 0 matures (normally Now + tier 0 delay).
	NextAttemptAt time.Time
	// LeaseOwner, when set, inserts the delivery in_flight under this
	// owner until LeaseUntil, exactly as if DeliveryClaim had just claimed
	// it: the inserting node sends it straight away without a claim
	// (direct dispatch), and if that node dies the lease expires and
	// DeliveryRescue makes it pending again. Only for subscriptions with
	// ordering none and no throttling, which a claim would not have held
	// back.
	LeaseOwner string
	LeaseUntil time.Time
}

// DeliveryCreateManyParams are the inputs of DeliveryCreateMany.
type DeliveryCreateManyParams struct {
	SubscriptionID string
	Deliveries     []DeliveryCreate
	Now            time.Time
}

// DeliveryCreate is one new delivery of a stored event.
type DeliveryCreate struct {
	// ID must be new (herald.NewID), as in DeliveryInsert.
	ID    string
	Event EventKey
	// NextAttemptAt is when tier 0 matures (normally Now + tier 0 delay).
	NextAttemptAt time.Time
}

// EventInsertResult answers one EventInsert, in input order.
type EventInsertResult struct {
	ID        string
	Duplicate bool
	// DeliveryCount is the number of deliveries stored for the event (for
	// a duplicate: stored by the original).
	DeliveryCount int
	// Dropped names the deliveries of this input that were not stored
	// because their subscription was deleted (or never existed) by the
	// time the transaction ran; nil when none. Never set for a duplicate.
	// A dropped delivery that was leased (direct dispatch) must not be
	// sent.
	Dropped []string
}

// DroppedDeliveries returns the ids of ds whose subscription is not in
// live (nil when there are none): a helper for backends filling
// EventInsertResult.Dropped.
func DroppedDeliveries(ds []DeliveryInsert, live map[string]bool) []string {
	var out []string
	for _, d := range ds {
		if !live[d.SubscriptionID] {
			out = append(out, d.ID)
		}
	}
	return out
}

// EventKey is an event's identity and idempotency key: its ID within its
// tenant ("" is the untenanted space, a tenant of its own). Two tenants
// publishing the same ID publish two events (issue 20).
type EventKey struct {
	Tenant string
	ID     string
}

// EventKeyOf returns ev's key.
func EventKeyOf(ev *herald.Event) EventKey { return EventKey{Tenant: ev.Tenant, ID: ev.ID} }

// EventGetParams name the event EventGet reads: ID within Tenant, or, with
// AnyTenant, ID in whichever tenant holds it (for callers that see every
// tenant). An ID that several tenants hold is then a conflict
// (herald.CodeConflict) naming them, never an arbitrary pick.
type EventGetParams struct {
	ID        string
	Tenant    string
	AnyTenant bool
}

// EventOne is EventGet's rule for the events found under one id (one per
// tenant at most; several only with AnyTenant): none is not found, one is
// the answer, several is a conflict naming their tenants, never a pick.
func EventOne(id string, found []*herald.Event) (*herald.Event, error) {
	switch len(found) {
	case 0:
		return nil, herald.NotFoundf("event %s not found", id)
	case 1:
		return found[0], nil
	}
	tenants := make([]string, len(found))
	for i, ev := range found {
		tenants[i] = cmp.Or(ev.Tenant, "(untenanted)")
	}
	return nil, herald.Errorf(herald.CodeConflict, "event %s exists in more than one tenant (%s): name the tenant",
		id, strings.Join(tenants, ", "))
}

// EventGetResult is an event with its deliveries.
type EventGetResult struct {
	Event      *herald.Event
	Deliveries []*herald.Delivery
}

// DeliveryGetResult is a delivery with its attempts (oldest first).
type DeliveryGetResult struct {
	Delivery *herald.Delivery
	Attempts []herald.Attempt
}

// DeliveryListParams filter and page deliveries. Empty fields do not filter.
type DeliveryListParams struct {
	SubscriptionID string
	// Tenant, when set, lists only deliveries of that tenant's
	// subscriptions.
	Tenant  string
	EventID string
	State   herald.DeliveryState
	// Limit is at most 1000; 0 means 100.
	Limit int
	// Before returns deliveries with id < Before (newest first paging).
	Before string
	// Since (inclusive) and Until (exclusive) bound created_at; zero means
	// unbounded.
	Since, Until time.Time
}

// DeliveryListResult is one page, newest first.
type DeliveryListResult struct {
	Deliveries []*herald.Delivery
	More       bool
}

// OrderedNextDueWindow is how many of an ordered subscription's earliest
// due deliveries DeliveryNextDue examines for a keyless one. A keyless due
// delivery further back cannot have been left behind by a claim that came
// back short (such a claim saw every due row), so the engine, which asks
// only after a short claim, is not missing work; one inserted since was
// notified.
const OrderedNextDueWindow = 256

// DeliveryCompleteManyParams are the inputs of DeliveryCompleteMany.
type DeliveryCompleteManyParams struct {
	Outcomes []DeliveryOutcome
	// DisableSubscriptions are applied in the same transaction (410 Gone).
	// Only enabled subscriptions change (state, reason, updated_at) and
	// bump the subscriptions version: a second 410 from a subscription
	// already disabled leaves it, and the version, alone.
	DisableSubscriptions []SubscriptionDisable
	// PauseSubscriptions are applied in the same transaction (429/503 with
	// Retry-After): each subscription's paused_until becomes the later of
	// its current value and Until, and no node claims its deliveries
	// before then. Applied even when the outcome that caused it is stale.
	// A pause that moved a paused_until bumps the pauses version, not the
	// subscriptions version (SubscriptionsVersions), so fan-out caches
	// (and the direct dispatch they drive) reload the pauses alone.
	PauseSubscriptions []SubscriptionPause
	// Events are inserted in the same transaction (system events), with
	// the same rules as EventInsertMany.
	Events []EventInsert
	// Health are the outcomes' effect on their subscriptions' health
	// (store/health.go), applied in the same transaction: at most one per
	// subscription. The streaks they leave are in the result's Health.
	Health []HealthUpdate
	Now    time.Time
}

// DeliveryOutcome is the result of one attempt.
type DeliveryOutcome struct {
	DeliveryID string
	LeaseOwner string
	Attempt    herald.Attempt
	// State is the new state: delivered, pending (a retry) or dead; any
	// other is refused (OutcomesValidate).
	State herald.DeliveryState
	// Tier is the delivery's tier after the outcome (the next tier for a
	// retry; the tier attempted from otherwise).
	Tier int
	// NextAttemptAt is set for a retry (required when State is pending),
	// and only for a retry.
	NextAttemptAt *time.Time
}

// SubscriptionDisable disables one subscription with a reason.
type SubscriptionDisable struct {
	ID     string
	Reason string
	// MinFailures, when above 0, makes the disable conditional: it applies
	// only while the subscription's failure streak (HealthUpdate) is at
	// least that long, so an auto-disable decided from a streak that a
	// re-enable has since reset does not disable again.
	MinFailures int
}

// SubscriptionPause pauses one subscription until a time.
type SubscriptionPause struct {
	ID    string
	Until time.Time
}

// DeliveryCompleteManyResult reports what was applied.
type DeliveryCompleteManyResult struct {
	// Applied counts outcomes that changed their delivery's state.
	Applied int
	// Stale lists delivery ids whose lease was no longer held by the
	// outcome's owner; their state was left alone.
	Stale []string
	// Health holds, for each HealthUpdate applied, the streak it left, in
	// any order.
	Health []HealthStreak
	// Disabled lists the DisableSubscriptions that disabled their
	// subscription (it was enabled, and a conditional disable's condition
	// held), in any order.
	Disabled []string
}

// DeliveryReleaseParams are the inputs of DeliveryRelease.
type DeliveryReleaseParams struct {
	IDs        []string
	LeaseOwner string
	Now        time.Time
}

// DeliveryRescueParams are the inputs of DeliveryRescue.
type DeliveryRescueParams struct {
	Now time.Time
}

// DeliveryRescueDeadParams are the inputs of DeliveryRescueDead.
type DeliveryRescueDeadParams struct {
	Now time.Time
}

// NodeLivenessHoldParams are the inputs of NodeLivenessHold.
type NodeLivenessHoldParams struct {
	NodeID string
	Now    time.Time
}

// DeliveryRetryParams are the inputs of DeliveryRetry.
type DeliveryRetryParams struct {
	ID  string
	Now time.Time
}

// DeliveryCancelOrphanedParams are the inputs of DeliveryCancelOrphaned.
type DeliveryCancelOrphanedParams struct {
	Now time.Time
}

// DeliveryTierClampParams are the inputs of DeliveryTierClamp.
type DeliveryTierClampParams struct {
	// Tiers is the number of configured tiers (at least 1).
	Tiers int
	Now   time.Time
}

// Validate refuses a clamp to fewer than one tier: there would be no tier
// to move to.
func (p *DeliveryTierClampParams) Validate() error {
	if p.Tiers < 1 {
		return herald.FieldErrorf(herald.CodeInvalidField, "tiers", "at least one tier is needed, got %d", p.Tiers)
	}
	return nil
}

// DeliveryTierClampResult says what DeliveryTierClamp moved.
type DeliveryTierClampResult struct {
	// Moved counts the deliveries moved, by the tier they left; empty when
	// none was beyond the configured tiers.
	Moved map[int]int
	// To is the tier they moved to (Tiers-1).
	To int
}

// Total is the number of deliveries moved.
func (r *DeliveryTierClampResult) Total() int {
	n := 0
	for _, c := range r.Moved {
		n += c
	}
	return n
}

// DeadLetterRedriveParams are the inputs of DeadLetterRedrive.
type DeadLetterRedriveParams struct {
	SubscriptionID string // required
	// Since (inclusive) and Until (exclusive) bound when the delivery died
	// (updated_at); zero means unbounded.
	Since, Until time.Time
	// Error, when set, takes only dead letters whose last attempt failed
	// with this class.
	Error herald.ErrorClass
	// Limit, when > 0, redrives at most this many (the ones that died
	// first), so a client can redrive a large backlog in steps and show
	// progress.
	Limit int
	Now   time.Time
}

// RawJSON is a helper for backends: it returns v or JSON null.
func RawJSON(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// Paging limits of the List methods.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// PageLimit applies the List methods' paging rule: 0 (or less) means
// DefaultPageLimit, and no page is larger than MaxPageLimit.
func PageLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultPageLimit
	case n > MaxPageLimit:
		return MaxPageLimit
	}
	return n
}
