package eventtype

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/store"
)

// DefaultPoll is how long a Catalog trusts its cache before it reads the
// store's event types version again: the longest another node's catalog
// change takes to reach this node's publishes.
const DefaultPoll = time.Second

// Reader is what a Catalog reads (store.EventTypeStore's read half).
type Reader interface {
	EventTypesVersion(ctx context.Context) (int64, error)
	EventTypeList(ctx context.Context, params *store.EventTypeListParams) (*store.EventTypeListResult, error)
}

// Catalog caches the compiled schemas of the event types that validate
// (Validate set and a schema), for the publish paths.
type Catalog struct {
	store  Reader
	poll   time.Duration
	now    func() time.Time
	logger *slog.Logger

	// mu serializes refreshes: callers that find the cache stale wait
	// for one read of the version rather than each making one.
	mu    sync.Mutex
	state atomic.Pointer[catalogState]
	// stale forces the next Validate to read the version (Invalidate).
	stale atomic.Bool
}

type catalogState struct {
	version int64
	checked time.Time
	// schemas of the validating types by name; replaced, never modified.
	schemas map[string]*compiled
}

type compiled struct {
	raw    string
	schema *Schema
}

// NewCatalog returns a Catalog reading s; poll ≤ 0 means DefaultPoll.
func NewCatalog(s Reader, poll time.Duration, logger *slog.Logger) *Catalog {
	if poll <= 0 {
		poll = DefaultPoll
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Catalog{store: s, poll: poll, now: time.Now, logger: logger}
}

// Invalidate makes the next Validate read the store's version: the API
// calls it after a catalog write on this node, so this node's publishes
// see the change at once (other nodes within their poll).
func (c *Catalog) Invalidate() { c.stale.Store(true) }

// Validate checks ev's data against its type's schema when that type
// validates; path is where the data sits in the request ("data",
// "events[3].data"). A mismatch is CodeSchemaMismatch naming the value at
// fault. An error reading the store is returned only while nothing was
// ever loaded; after that the last loaded schemas serve until the store
// answers again.
func (c *Catalog) Validate(ctx context.Context, ev *herald.Event, path string) error {
	st, err := c.current(ctx)
	if err != nil {
		return err
	}
	return validateIn(st, ev, path)
}

// ValidateWithin is Validate with the store read, when the cache must be
// refreshed, bounded by timeout: a caller validating event after event
// (a source's batch) sets up no timer while the cache is fresh.
func (c *Catalog) ValidateWithin(timeout time.Duration, ev *herald.Event, path string) error {
	if st := c.state.Load(); c.fresh(st) {
		return validateIn(st, ev, path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Validate(ctx, ev, path)
}

func validateIn(st *catalogState, ev *herald.Event, path string) error {
	cs := st.schemas[ev.Type]
	if cs == nil {
		return nil
	}
	if err := cs.schema.Validate(ev.Data, path); err != nil {
		var he *herald.Error
		if errors.As(err, &he) {
			he.Message += fmt.Sprintf(" (the schema of event type %s)", ev.Type)
		}
		return err
	}
	return nil
}

func (c *Catalog) fresh(st *catalogState) bool {
	return st != nil && !c.stale.Load() && c.now().Sub(st.checked) < c.poll
}

// current returns the cache, refreshed first when it is older than the
// poll interval or invalidated.
func (c *Catalog) current(ctx context.Context) (*catalogState, error) {
	if st := c.state.Load(); c.fresh(st) {
		return st, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state.Load()
	if c.fresh(st) {
		return st, nil
	}
	// Cleared before reading: an Invalidate during the read forces one more.
	c.stale.Store(false)
	next, err := c.load(ctx, st)
	if err != nil {
		if st != nil {
			c.stale.Store(true)
			c.logger.Warn("event types: refreshing the schema cache failed; using the last one", "error", err)
			return st, nil
		}
		return nil, err
	}
	c.state.Store(next)
	return next, nil
}

// load reads the version and, when it moved, every event type, compiling
// the schemas that changed.
func (c *Catalog) load(ctx context.Context, prev *catalogState) (*catalogState, error) {
	v, err := c.store.EventTypesVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("error reading the event types version: %w", err)
	}
	now := c.now()
	if prev != nil && prev.version == v {
		return &catalogState{version: v, checked: now, schemas: prev.schemas}, nil
	}
	res, err := c.store.EventTypeList(ctx, &store.EventTypeListParams{IncludeDeprecated: true})
	if err != nil {
		return nil, fmt.Errorf("error loading event types: %w", err)
	}
	schemas := map[string]*compiled{}
	for _, et := range res.EventTypes {
		if !et.Validate || len(et.Schema) == 0 {
			continue
		}
		if prev != nil {
			if old := prev.schemas[et.Name]; old != nil && old.raw == string(et.Schema) {
				schemas[et.Name] = old
				continue
			}
		}
		sch, err := Compile(et.Schema)
		if err != nil { // checked when stored: only a library change gets here
			c.logger.Warn("event types: a stored schema does not compile; not validating its events",
				"event_type", et.Name, "error", err)
			continue
		}
		schemas[et.Name] = &compiled{raw: string(et.Schema), schema: sch}
	}
	// A version read before the list: a write between them is picked up
	// at the next refresh.
	return &catalogState{version: v, checked: now, schemas: schemas}, nil
}
