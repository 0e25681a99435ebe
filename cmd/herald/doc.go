// Command herald is the herald server and its tools.
//
//	herald serve     run a node (SQLite in ./herald-data, or --database-url postgres://…)
//	herald migrate   apply the schema migrations and exit
//	herald receive   a local receiver that prints and verifies deliveries
//	herald bench     an end-to-end load generator (loopback only)
//	herald secrets   generate-key, rotate-key: secrets encrypted at rest
//	herald version   print the version
//
// and the client commands (cli.go, commands.go): herald subscriptions …,
// events …, deliveries …, dead-letters …, filters test, stats, tail and
// completion, which call a running herald's /v1 API.
//
// Every flag also reads HERALD_<FLAG> from the environment and a key in the
// YAML file named by --config. See the README for the full list.
package main
