package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"

	"github.com/heraldhq/herald/client"
)

// This file is the client half of the herald binary: one table of
// commands (herald subscriptions create, herald events publish, …), each
// a thin layer over package client. The table drives dispatch, help and
// shell completion, so a command added here is complete everywhere.

// command is one client command.
type command struct {
	group string // first word: subscriptions, events, …
	name  string // second word; "" for one-word commands (stats, tail)
	// args is the positional arguments' synopsis ("ID"); nargs how many
	// are required exactly.
	args    string
	nargs   int
	summary string
	// offline commands need no server (completion).
	offline bool
	// setup defines the command's own flags and returns its action, which
	// reads them.
	setup func(fs *flag.FlagSet) action
}

type action func(ctx context.Context, c *cli, args []string) error

func (cmd command) path() string {
	return strings.TrimSpace(cmd.group + " " + cmd.name)
}

// commandTable lists every client command. A function, not a variable:
// completion reads the table, and a variable would refer to itself.
func commandTable() []command {
	return slices.Concat(subscriptionCommands(), connectionCommands(), sourceCommands(), eventTypeCommands(), eventCommands(), deliveryCommands(), tokenCommands(), portalCommands(), listenCommands(), otherCommands())
}

// isClientCommand reports whether name is the first word of a client
// command (main's switch sends those here).
func isClientCommand(name string) bool {
	return slices.ContainsFunc(commandTable(), func(c command) bool { return c.group == name })
}

// runClient runs a client command: args[0] is its group.
func runClient(ctx context.Context, args []string, env *cliEnv) error {
	table := commandTable()
	group := args[0]
	var cmd *command
	rest := args[1:]
	for i := range table {
		c := &table[i]
		if c.group != group {
			continue
		}
		if c.name == "" {
			cmd = c
			break
		}
		if len(rest) > 0 && rest[0] == c.name {
			cmd, rest = c, rest[1:]
			break
		}
	}
	if cmd == nil {
		if len(rest) > 0 && (rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help") {
			groupUsage(env.stdout, table, group) // asked for: output
			return flag.ErrHelp
		}
		groupUsage(env.stderr, table, group)
		if len(rest) == 0 {
			return usagef("%s: which command? (see the list above)", group)
		}
		return usagef("%s: unknown command %q", group, rest[0])
	}
	fs := flag.NewFlagSet("herald "+cmd.path(), flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var g globalFlags
	if !cmd.offline {
		g.register(fs)
	}
	act := cmd.setup(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: herald %s [flags]\n\n%s\n\nFlags:\n", strings.TrimSpace(cmd.path()+" "+cmd.args), cmd.summary)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, rest, env.stdout)
	if err != nil {
		return err
	}
	if len(pos) != cmd.nargs {
		fs.Usage()
		if cmd.nargs == 0 {
			return usagef("%s takes no arguments, got %q", cmd.path(), pos)
		}
		if len(pos) == 0 {
			return usagef("%s: %s is missing (herald %s %s)", cmd.path(), strings.TrimSpace(cmd.args), cmd.path(), cmd.args)
		}
		return usagef("%s takes %d argument(s) (%s), got %d", cmd.path(), cmd.nargs, strings.TrimSpace(cmd.args), len(pos))
	}
	c := &cli{cliEnv: env, json: g.json}
	var tokenFrom string
	if !cmd.offline {
		server, token, from, err := g.resolve(env)
		if err != nil {
			return asJSON(err, g.json)
		}
		tokenFrom = from
		c.api = client.New(server, token)
		c.api.UserAgent = "herald-cli/" + version
	}
	return asJSON(explain(act(ctx, c, pos), c.api, tokenFrom), g.json)
}

// explain adds what to do to the errors a new user meets first: a token
// the server refuses (where it was read from) or missing, and a server
// that is not running.
func explain(err error, api *client.Client, tokenFrom string) error {
	switch {
	case err == nil || api == nil:
		return err
	case errors.Is(err, client.ErrUnauthorized) && api.Token == "":
		return fmt.Errorf("%w (no token: pass --token, set HERALD_TOKEN, or point --data-dir at the local server's data directory)", err)
	case errors.Is(err, client.ErrUnauthorized):
		return fmt.Errorf("%w (read from %s)", err, tokenFrom)
	case client.IsConnError(err) && errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: is herald running? start it with: herald serve", err)
	}
	return err
}

// groupUsage lists a group's commands (every command for group "").
func groupUsage(w io.Writer, table []command, group string) {
	if group != "" {
		fmt.Fprintf(w, "Usage:\n")
	}
	for _, c := range table {
		if group == "" || c.group == group {
			fmt.Fprintf(w, "  herald %-34s %s\n", c.path()+" "+c.args, c.summary)
		}
	}
	fmt.Fprintf(w, "\nEvery command takes --server, --token, --data-dir and --json; herald <command> -h lists its flags.\n")
}
