// Package storetest is herald's storage conformance suite: the one set of
// tests every store.Store backend must pass, so that "same code, two stores"
// is proved rather than hoped.
//
// A backend's test calls Run with a factory that returns a fresh, migrated,
// empty store for each test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return testdb.SQLite(t) })
//	}
//
// Every subtest runs in parallel on its own store. Queue logic is driven by a
// fixed clock passed in params (never time.Now), so results do not depend on
// the machine's speed and no test sleeps. Times are compared at millisecond
// precision, the precision the contract promises.
//
// The suite assumes nothing about the backend beyond the contract in package
// store: when a behaviour matters to herald, write it down in store.go and
// test it here, not in one backend's own tests.
package storetest
