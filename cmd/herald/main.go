package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	err := run(os.Args[1:])
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "herald:", err)
	}
	// exitCode (cli.go) is the documented table: 0 ok, 1 error, 2 usage,
	// 3 cannot connect, 130 interrupted.
	os.Exit(exitCode(err))
}

func run(args []string) error {
	if len(args) == 0 {
		usage()
		return usagef("no command given")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:])
	case "migrate":
		return cmdMigrate(ctx, args[1:])
	case "receive":
		return cmdReceive(ctx, args[1:])
	case "bench":
		return cmdBench(ctx, args[1:])
	case "secrets":
		return cmdSecrets(ctx, args[1:], os.Stdout, os.Stderr)
	case "version", "--version", "-v":
		fmt.Println("herald", version)
		return nil
	case "help", "-h", "--help":
		usage()
		return nil
	default:
		if isClientCommand(args[0]) {
			return runClient(ctx, args, osEnv())
		}
		usage()
		return usagef("unknown command %q", args[0])
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `herald: self-hosted webhook delivery

Usage:
  herald serve   [flags]   run a node (herald serve -h lists the flags)
  herald migrate [flags]   apply schema migrations and exit
  herald receive [flags]   run a local webhook receiver that prints and verifies deliveries
  herald bench   [flags]   end-to-end load test against an in-process or local herald (herald bench -h)
  herald secrets generate-key | rotate-key [flags]
                           make an encryption key; re-encrypt stored secrets under the first key
  herald version           print the version

Client commands (talk to a running herald; herald <command> -h for flags):
`)
	groupUsage(os.Stderr, commandTable(), "")
	fmt.Fprint(os.Stderr, `
Server and token: --server/--token, else HERALD_URL/HERALD_TOKEN, else
http://127.0.0.1:8080 with the token in ./herald-data/admin.token.

Exit codes: 0 ok; 1 the server answered with an error (shown as
"herald: <code>: <message>") or another failure; 2 bad command, flag or
argument; 3 cannot connect to the server; 130 interrupted.
`)
}
