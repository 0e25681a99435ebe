// Package filter compiles subscription content filters and matches events
// against them.
//
// A herald.Filter carries exactly one of three languages. Each is matched
// against the event envelope {"id","type","timestamp","key","version","data"}
// (key and version absent when the event has none), the document a
// subscriber receives:
//
//   - CEL (cel.dev/cel-go), herald's own filter language. Variables: type
//     (string), key (string, "" when absent), version (int, 0 when absent),
//     has_version (bool), data (dyn) and event (dyn, the whole envelope). The
//     expression must be of type bool; data.flag alone is dyn and is refused,
//     data.flag == true is not. The ext.Strings library is available.
//     Integers in data are CEL ints, other numbers doubles; mixed comparisons
//     work (data.size > 1.5).
//   - JMESPath (github.com/jmespath/go-jmespath), as DSS v2 subscriptions
//     used it: the event matches when the result is truthy (false, null, "",
//     [] and {} are not; every number is).
//   - An Elasticsearch query-DSL subset, as DSS v1 subscriptions used it:
//     {"query": {...}} or the bare query, with bool (must, filter, should,
//     must_not, minimum_should_match), constant_score, term, terms, match,
//     match_all, match_none, range, exists, prefix and wildcard. Without
//     index mappings the document's own JSON types decide: strings compare
//     exactly (term) or by whitespace token, case-insensitively (match, not
//     ES's standard analyzer); numbers compare numerically whether written as
//     ints or floats, and a string that reads as a number equals that number;
//     range orders strings lexicographically (RFC 3339 timestamps in one zone
//     compare correctly; date math such as "now-1d" is refused). Dotted field
//     paths walk through arrays, matching when any element does, and find
//     keys that contain dots. A field ending in ".keyword" also reaches the
//     string values of the field without it, as ES dynamic mappings do.
//
// Compile refuses a filter that does not compile with a *herald.Error of
// code herald.CodeInvalidFilter whose Field names the fault. Matching never
// fails: an evaluation error (a missing key, a type mismatch, a cost limit)
// is "no match", as in DSS, and no filter can panic or hang the delivery
// path. Every evaluation runs under a work budget: CELCostLimit for CEL,
// ESQueryCostLimit for ES queries, and for JMESPath, which cannot be
// interrupted, a bound computed at compile time (JMESPathMaxCostFactor) and
// checked against the event before it runs (JMESPathCostLimit). Evaluations
// stopped by their budget are counted (CostLimitHits). Expressions are
// further bounded by MaxCELLength, MaxJMESPathLength, MaxESQueryBytes,
// MaxESQueryDepth, MaxESQueryClauses and MaxESQueryTerms.
//
// NewInput decodes an event once for any number of filters; numbers keep
// int64 precision where the JSON literal is an integer.
//
// Delivers is the whole fan-out rule for one subscription (system events,
// tenant, event types, then the filter): the ingester applies it to new
// events and replay to stored ones.
package filter
