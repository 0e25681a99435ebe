// Package openapitest checks real requests and answers against herald's
// OpenAPI document (package openapi), for the tests of the packages that
// serve them. httpapi's test client runs every request through Check.
//
// The rule Check enforces, for one request and its answer:
//   - a request to a documented operation whose answer is documented for
//     its status, headers and body (statuses the operation does not list
//     fail);
//   - a request the document refuses (bad parameters, body, or no token)
//     must be refused by the server too: its answer must be a 4xx. This
//     lets tests send deliberately malformed input through the same client,
//     while the document can never be stricter than the server in a way a
//     test exercises;
//   - a request to no documented operation (an unknown path or a wrong
//     method) must be answered 404 or 405 (or 401 under /v1/, which
//     authenticates before it says whether a route exists) with an error
//     body the document defines (Error or PushError).
package openapitest
