// Package bench is the load side of `herald bench`: the event load
// generator (generator.go), the local webhook receiver that timestamps what
// it gets (receiver.go), the latency recorder (recorder.go), the raw
// net/http ceiling run (ceiling.go), the over-time sampler and progress line
// (sampler.go), the report (report.go), the Web Push load (push.go; the
// cluster scenario in push_cluster.go, its client processes'
// side in push_client.go) and the destination runs (destination.go: the broker client's own
// publish-with-ack rate, then herald delivering to a consumer on the same
// broker, dest_*.go per type), and the floor of `--steady --floor`
// (relay.go: a bare relay that stores and forwards, which cmd/herald runs
// as `herald bench relay` in a process of its own; floor.go drives it). It
// reaches herald through client/ only and never starts a node: cmd/herald/bench.go parses the flags, starts
// the in-process node (or bench_push.go the child herald serve, and
// bench_push_cluster.go the cluster's nodes, client processes and
// database) and prints.
//
// Every bench run talks to loopback only (CheckLoopback): it is a load
// generator, and must not be pointable at somebody else's server.
package bench
