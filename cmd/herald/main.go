// Command herald is the herald server and its tools.
//
//	herald serve     run a node (SQLite in ./herald-data, or --database-url postgres://…)
//	herald migrate   apply the schema migrations and exit
//	herald receive   a local receiver that prints and verifies deliveries
//	herald bench     an end-to-end load generator (loopback only)
//	herald version   print the version
//
// Every flag also reads HERALD_<FLAG> from the environment and a key in the
// YAML file named by --config. See the README for the full list.
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
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		usage()
		return errors.New("no command given")
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
	case "version", "--version", "-v":
		fmt.Println("herald", version)
		return nil
	case "help", "-h", "--help":
		usage()
		return nil
	default:
		usage()
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `herald: self-hosted webhook delivery

Usage:
  herald serve   [flags]   run a node (herald serve -h lists the flags)
  herald migrate [flags]   apply schema migrations and exit
  herald receive [flags]   run a local webhook receiver that prints and verifies deliveries
  herald bench   [flags]   end-to-end load test against an in-process or local herald (herald bench -h)
  herald version           print the version
`)
}
