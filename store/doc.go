// Package store defines herald's storage contract. Two backends implement it:
// store/sqlite (embedded, one node) and store/postgres (several nodes). One
// conformance suite, store/storetest, proves every behaviour on both.
//
// Conventions (River-style): ctx first, one params struct per method, method
// names read noun-then-verb. Time-dependent methods take Now in their params
// so tests control the clock; backends never call time.Now for queue logic.
// Times are stored with millisecond precision: a time read back equals the
// one written truncated to the millisecond (callers that compare or page by
// time should truncate first).
// Errors are herald.ErrNotFound / herald.ErrConflict where the contract says
// so, herald.ErrStoreUnavailable (wrapped) when the database cannot be
// reached, and wrapped driver errors otherwise. A failed call changes
// nothing: every method that writes runs in one transaction.
package store
