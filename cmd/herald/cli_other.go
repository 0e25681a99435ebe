package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/heraldhq/herald/client"
)

func otherCommands() []command {
	return []command{
		{group: "filters", name: "test", summary: "would a subscription with this filter and these event types receive this event?", setup: filterTest},
		{group: "stats", summary: "queue per retry tier and totals (--subscriptions: outcomes per subscription)", setup: statsCmd},
		{group: "completion", name: "bash", offline: true, summary: "print the bash completion script (source <(herald completion bash))", setup: completionCmd("bash")},
		{group: "completion", name: "zsh", offline: true, summary: "print the zsh completion script (herald completion zsh > \"${fpath[1]}/_herald\")", setup: completionCmd("zsh")},
	}
}

func filterTest(fs *flag.FlagSet) action {
	cel := fs.String("filter-cel", "", "filter as a CEL expression")
	jmes := fs.String("filter-jmespath", "", "filter as a JMESPath expression")
	es := fs.String("filter-es-query", "", "filter as an Elasticsearch-style query (JSON)")
	types := fs.String("event-types", "", "comma-separated event type patterns (none: every type)")
	typ := fs.String("type", "", "the event's type (required)")
	data := fs.String("data", "", "the event's data (JSON)")
	key := fs.String("key", "", "the event's key")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *typ == "" {
			return usagef("--type is required")
		}
		p := client.FilterTestParams{Event: client.FilterTestEvent{Type: *typ, Key: *key}}
		if *types != "" {
			p.EventTypes = splitList(*types)
		}
		n := 0
		for _, v := range []string{*cel, *jmes, *es} {
			if v != "" {
				n++
			}
		}
		if n > 1 {
			return usagef("give at most one of --filter-cel, --filter-jmespath and --filter-es-query")
		}
		switch {
		case *cel != "":
			p.Filter = &client.Filter{CEL: *cel}
		case *jmes != "":
			p.Filter = &client.Filter{JMESPath: *jmes}
		case *es != "":
			q, err := jsonArg("filter-es-query", *es)
			if err != nil {
				return err
			}
			p.Filter = &client.Filter{ESQuery: q}
		}
		if *data != "" {
			d, err := jsonArg("data", *data)
			if err != nil {
				return err
			}
			p.Event.Data = d
		}
		res, err := c.api.TestFilter(ctx, p)
		if err != nil {
			return err
		}
		if c.json {
			return c.out(res)
		}
		verdict := map[bool]string{true: "yes", false: "no"}
		fmt.Fprintf(c.stdout, "matched: %s (event type: %s, filter: %s)\n", verdict[res.Matched], verdict[res.TypeMatched], verdict[res.FilterMatched])
		return nil
	}
}

func statsCmd(fs *flag.FlagSet) action {
	perSub := fs.Bool("subscriptions", false, "show delivered/dead/pending per subscription instead")
	perTenant := fs.Bool("tenants", false, "show delivered/dead/pending per tenant instead (admin; the top --limit, the rest summed)")
	limit := fs.Int("limit", 0, "with --tenants: how many tenants to list (default 20)")
	since := fs.String("since", "", "with --subscriptions or --tenants: count outcomes since this time (RFC 3339, or a duration ago; default 24h)")
	return func(ctx context.Context, c *cli, _ []string) error {
		if *perTenant {
			return tenantStats(ctx, c, *since, *limit)
		}
		if *limit != 0 {
			return usagef("--limit needs --tenants")
		}
		if *perSub {
			t, err := parseTime("since", *since)
			if err != nil {
				return err
			}
			res, err := c.api.SubscriptionStats(ctx, t)
			if err != nil {
				return err
			}
			if c.json {
				for _, s := range res.Data {
					if err := c.out(s); err != nil {
						return err
					}
				}
				return nil
			}
			fmt.Fprintf(c.stdout, "since %s\n", res.Since)
			tw := c.table("SUBSCRIPTION", "DELIVERED", "DEAD", "PENDING", "IN FLIGHT", "SUCCESS")
			for _, s := range res.Data {
				rate := ""
				if s.SuccessRate != nil {
					rate = fmt.Sprintf("%.1f%%", *s.SuccessRate*100)
				}
				row(tw, s.SubscriptionID, s.Delivered, s.Dead, s.Pending, s.InFlight, rate)
			}
			return tw.Flush()
		}
		if *since != "" {
			return usagef("--since needs --subscriptions or --tenants")
		}
		st, err := c.api.Stats(ctx)
		if err != nil {
			return err
		}
		if c.json {
			return c.out(st)
		}
		tw := c.table("TIER", "DELAY", "PENDING", "DUE", "HELD", "IN FLIGHT", "OLDEST")
		for _, t := range st.Tiers {
			delay := t.Delay
			if t.Removed {
				delay = "(removed)"
			}
			row(tw, t.Tier, delay, t.Pending, t.Due, t.Held, t.InFlight, fmt.Sprintf("%.1fs", t.OldestPendingAgeS))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "\ndead %d  delivered %d  throttled %d  skipped %d  superseded %d\n",
			st.Dead, st.DeliveredTotal, st.Throttled, st.Skipped, st.Superseded)
		return nil
	}
}

// tenantStats prints GET /v1/stats/tenants: one line per listed tenant
// ("-" untenanted) and "(others)" for the rest summed; with --json one
// object per line, the summed rest last with "other": true.
func tenantStats(ctx context.Context, c *cli, since string, limit int) error {
	t, err := parseTime("since", since)
	if err != nil {
		return err
	}
	res, err := c.api.TenantStats(ctx, t, limit)
	if err != nil {
		return err
	}
	if c.json {
		for _, s := range res.Data {
			if err := c.out(s); err != nil {
				return err
			}
		}
		if res.Other != nil {
			return c.out(struct {
				client.TenantStats
				Other bool `json:"other"`
			}{*res.Other, true})
		}
		return nil
	}
	fmt.Fprintf(c.stdout, "since %s\n", res.Since)
	tw := c.table("TENANT", "SUBSCRIPTIONS", "DELIVERED", "DEAD", "PENDING", "IN FLIGHT", "SUCCESS")
	line := func(name string, s *client.TenantStats) {
		rate := ""
		if s.SuccessRate != nil {
			rate = fmt.Sprintf("%.1f%%", *s.SuccessRate*100)
		}
		row(tw, name, s.Subscriptions, s.Delivered, s.Dead, s.Pending, s.InFlight, rate)
	}
	for i := range res.Data {
		name := "-"
		if res.Data[i].Tenant != nil {
			name = *res.Data[i].Tenant
		}
		line(name, &res.Data[i])
	}
	if res.Other != nil {
		line("(others)", res.Other)
	}
	return tw.Flush()
}

func completionCmd(shell string) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		return func(_ context.Context, c *cli, _ []string) error {
			script := bashCompletion()
			if shell == "zsh" {
				script = zshCompletion()
			}
			_, err := fmt.Fprint(c.stdout, script)
			return err
		}
	}
}

// serverCommands are the first words of herald's own (non-client)
// commands, offered by completion too.
var serverCommands = []string{"serve", "migrate", "secrets", "receive", "bench", "version", "help"}

// serverFlags adds the subcommands and flags of the server commands that
// read config.flags (serve, migrate, secrets rotate-key), so completion
// offers them as it does the client commands'.
func serverFlags(second, flags map[string][]string) {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	(&config{}).flags(fs)
	var all []string
	fs.VisitAll(func(f *flag.Flag) { all = append(all, "--"+f.Name) })
	flags["serve"] = all
	for _, name := range migrateFlags {
		flags["migrate"] = append(flags["migrate"], "--"+name)
	}
	second["secrets"] = []string{"generate-key", "rotate-key"}
	flags["secrets rotate-key"] = append(slices.Clone(all), "--batch")
}

// completionWords returns the first words, the second words per group and
// the flags per command path ("subscriptions create"), from the table.
func completionWords() (first []string, second map[string][]string, flags map[string][]string) {
	second, flags = map[string][]string{}, map[string][]string{}
	first = slices.Clone(serverCommands)
	serverFlags(second, flags)
	for _, cmd := range commandTable() {
		if !slices.Contains(first, cmd.group) {
			first = append(first, cmd.group)
		}
		if cmd.name != "" {
			second[cmd.group] = append(second[cmd.group], cmd.name)
		}
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		if !cmd.offline {
			var g globalFlags
			g.register(fs)
		}
		cmd.setup(fs)
		fs.VisitAll(func(f *flag.Flag) { flags[cmd.path()] = append(flags[cmd.path()], "--"+f.Name) })
	}
	return first, second, flags
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// bashCompletion completes commands, subcommands and flags; the values
// of --state and --ordering too.
func bashCompletion() string {
	first, second, flags := completionWords()
	var b strings.Builder
	b.WriteString("# bash completion for herald; load with: source <(herald completion bash)\n")
	b.WriteString("_herald() {\n  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n")
	b.WriteString("  case \"$prev\" in\n")
	b.WriteString("    --state) COMPREPLY=($(compgen -W \"" + strings.ReplaceAll(deliveryStates, ",", "") + " enabled disabled\" -- \"$cur\")); return ;;\n")
	b.WriteString("    --ordering) COMPREPLY=($(compgen -W \"none fifo latest\" -- \"$cur\")); return ;;\n")
	b.WriteString("    --file|--data-dir) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n")
	b.WriteString("  esac\n")
	fmt.Fprintf(&b, "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n    COMPREPLY=($(compgen -W %q -- \"$cur\")); return\n  fi\n", strings.Join(first, " "))
	b.WriteString("  if [ \"$COMP_CWORD\" -eq 2 ]; then\n    case \"${COMP_WORDS[1]}\" in\n")
	for _, g := range sortedKeys(second) {
		fmt.Fprintf(&b, "      %s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", g, strings.Join(second[g], " "))
	}
	b.WriteString("    esac\n  fi\n")
	b.WriteString("  local path=\"${COMP_WORDS[1]}\"\n")
	b.WriteString("  [ \"$COMP_CWORD\" -ge 2 ] && case \"${COMP_WORDS[2]}\" in -*|'') ;; *) path=\"$path ${COMP_WORDS[2]}\" ;; esac\n")
	b.WriteString("  case \"$path\" in\n")
	for _, p := range sortedKeys(flags) {
		fmt.Fprintf(&b, "    %q) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", p, strings.Join(flags[p], " "))
	}
	b.WriteString("  esac\n}\ncomplete -F _herald herald\n")
	return b.String()
}

// zshCompletion is a native zsh completion function (#compdef), built
// from the same table.
func zshCompletion() string {
	first, second, flags := completionWords()
	var b strings.Builder
	b.WriteString("#compdef herald\n# zsh completion for herald; install with: herald completion zsh > \"${fpath[1]}/_herald\"\n")
	b.WriteString("_herald() {\n")
	b.WriteString("  case \"${words[CURRENT-1]}\" in\n")
	b.WriteString("    --state) compadd -- " + strings.ReplaceAll(deliveryStates, ",", "") + " enabled disabled; return ;;\n")
	b.WriteString("    --ordering) compadd -- none fifo latest; return ;;\n")
	b.WriteString("    --file|--data-dir) _files; return ;;\n")
	b.WriteString("  esac\n")
	fmt.Fprintf(&b, "  if (( CURRENT == 2 )); then\n    compadd -- %s; return\n  fi\n", strings.Join(first, " "))
	b.WriteString("  if (( CURRENT == 3 )); then\n    case \"${words[2]}\" in\n")
	for _, g := range sortedKeys(second) {
		fmt.Fprintf(&b, "      %s) compadd -- %s; return ;;\n", g, strings.Join(second[g], " "))
	}
	b.WriteString("    esac\n  fi\n")
	b.WriteString("  local path_=\"${words[2]}\"\n")
	b.WriteString("  [[ \"${words[3]}\" != -* && -n \"${words[3]}\" && CURRENT -gt 3 ]] && path_=\"$path_ ${words[3]}\"\n")
	b.WriteString("  case \"$path_\" in\n")
	for _, p := range sortedKeys(flags) {
		fmt.Fprintf(&b, "    %q) compadd -- %s ;;\n", p, strings.Join(flags[p], " "))
	}
	b.WriteString("  esac\n}\n_herald \"$@\"\n")
	return b.String()
}
