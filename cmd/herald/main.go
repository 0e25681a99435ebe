package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// version is set with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	err := run(os.Args[1:])
	// Help was printed as asked; an interrupt (Ctrl-C) is how tail and
	// serve end, not an error, so it leaves only the exit code.
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, context.Canceled) {
		printError(os.Stderr, err)
	}
	// exitCode (cli.go) is the documented table: 0 ok, 1 error, 2 usage,
	// 3 cannot connect, 130 interrupted.
	os.Exit(exitCode(err))
}

func run(args []string) error {
	if len(args) == 0 {
		usage(os.Stderr)
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
	case "webpush":
		return cmdWebPush(ctx, args[1:], os.Stdout, os.Stderr)
	case "push":
		return cmdPush(ctx, args[1:], os.Stdout, os.Stderr)
	case "version", "--version", "-v":
		info, _ := debug.ReadBuildInfo()
		fmt.Println(versionString(version, info))
		return nil
	case "help", "-h", "--help":
		usage(os.Stdout) // asked for: output, so `herald --help | less` shows it
		return nil
	default:
		if isClientCommand(args[0]) {
			return runClient(ctx, args, osEnv())
		}
		usage(os.Stderr)
		return usagef("unknown command %q", args[0])
	}
}

// versionString is what herald version prints: the version, then the
// commit, its time and whether the tree had changes, when the binary was
// built from a checkout (go build records them; info may be nil).
func versionString(version string, info *debug.BuildInfo) string {
	var rev, at string
	modified := false
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if rev == "" {
		return "herald " + version
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "herald %s (commit %s", version, rev)
	if modified {
		b.WriteString(" with local changes")
	}
	if at != "" {
		fmt.Fprintf(&b, ", %s", at)
	}
	b.WriteString(")")
	return b.String()
}

func usage(w io.Writer) {
	fmt.Fprint(w, `herald: self-hosted webhook delivery

Usage:
  herald serve   [flags]   run a node (herald serve -h lists the flags)
  herald migrate [flags]   apply schema migrations and exit
  herald receive [flags]   run a local webhook receiver that prints and verifies deliveries
  herald bench   [flags]   end-to-end load test against an in-process or local herald (herald bench -h)
  herald secrets generate-key | rotate-key [flags]
                           make an encryption key; re-encrypt stored secrets under the first key
  herald webpush rotate-vapid [flags]
                           replace the VAPID key of Web Push destinations (browsers resubscribe)
  herald push send ENDPOINT --p256dh … --auth … [--vapid-key FILE | --from-store] --data …
                           encrypt, VAPID-sign and send one Web Push message (herald push send -h)
  herald version           print the version

Client commands (talk to a running herald; herald <command> -h for flags):
`)
	groupUsage(w, commandTable(), "")
	fmt.Fprint(w, `
Server and token: --server/--token, else HERALD_URL/HERALD_TOKEN, else
http://127.0.0.1:8080 with the token in ./herald-data/admin.token.

Exit codes: 0 ok; 1 the server answered with an error (shown as
"herald: <code>: <message>") or another failure; 2 bad command, flag or
argument; 3 cannot connect to the server; 130 interrupted.
`)
}
