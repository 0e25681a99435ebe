package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/heraldhq/herald/client"
)

// Exit codes of every herald command, documented in the README ("CLI") and
// the usage text. Scripts may rely on them.
const (
	exitOK          = 0
	exitAPI         = 1 // the server answered with an error (or another failure)
	exitUsage       = 2 // bad command, flag or argument
	exitConnect     = 3 // no answer from the server
	exitInterrupted = 130
)

// defaultServer is the server the CLI talks to without --server or
// HERALD_URL: herald serve's default --listen.
const defaultServer = "http://127.0.0.1:8080"

// usageError marks a command-line mistake (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// jsonError marks the error of a command run with --json: printError
// prints it as JSON, so a script reads errors as it reads results.
type jsonError struct{ err error }

func (e jsonError) Error() string { return e.err.Error() }
func (e jsonError) Unwrap() error { return e.err }

// asJSON marks err (when not nil) to be printed as JSON when on.
func asJSON(err error, on bool) error {
	if err == nil || !on {
		return err
	}
	return jsonError{err}
}

// printError prints the error run returned on w (stderr): "herald: …",
// or for a command run with --json one line
// {"error":{"code":…,"message":…}} (plus "field" when the API named one).
// Codes are the API's, else usage, cannot_connect or error.
func printError(w io.Writer, err error) {
	var je jsonError
	if !errors.As(err, &je) {
		fmt.Fprintln(w, "herald:", err)
		return
	}
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field,omitempty"`
	}
	b := body{Code: "error", Message: err.Error()}
	var ae *client.APIError
	var ue usageError
	var ce *client.ConnError
	switch {
	case errors.As(err, &ae):
		// The message keeps what the CLI added ("(read from --token)").
		b = body{Code: ae.Code, Message: strings.TrimPrefix(err.Error(), ae.Code+": "), Field: ae.Field}
	case errors.As(err, &ue):
		b.Code = "usage"
	case errors.As(err, &ce):
		b.Code = "cannot_connect"
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]body{"error": b})
}

// exitCode maps an error returned by run to the process's exit code.
func exitCode(err error) int {
	var ue usageError
	var ce *client.ConnError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ce):
		return exitConnect
	}
	return exitAPI
}

// cliEnv is what a client command reads and writes besides the server:
// the process's standard streams and environment, replaced in tests.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// stdinTTY and stderrTTY say whether the streams are terminals: the
	// progress bar and the redrive prompt need one.
	stdinTTY, stderrTTY bool
}

func osEnv() *cliEnv {
	return &cliEnv{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv,
		stdinTTY: term.IsTerminal(int(os.Stdin.Fd())), stderrTTY: term.IsTerminal(int(os.Stderr.Fd()))}
}

// cli is one client command's context: the API client, output mode and
// streams.
type cli struct {
	*cliEnv
	api  *client.Client
	json bool
}

// globalFlags are the flags every client command takes.
type globalFlags struct {
	server, token, dataDir string
	json                   bool
}

func (g *globalFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.server, "server", "", "herald server URL (env HERALD_URL; default "+defaultServer+")")
	fs.StringVar(&g.token, "token", "", "API token (env HERALD_TOKEN; default for a local server: <data-dir>/admin.token)")
	fs.StringVar(&g.dataDir, "data-dir", "", "data directory of a local server, for its admin.token (env HERALD_DATA_DIR; default ./herald-data)")
	fs.BoolVar(&g.json, "json", false, "print JSON (one object per line) instead of tables")
}

// resolve picks the server and token: flags, then HERALD_URL and
// HERALD_TOKEN, then the default server and, for a server on this
// machine, the admin token herald serve wrote on first start. from says
// where the token came from ("--token", "HERALD_TOKEN" or the file), for
// the message when the server refuses it; "" when there is no token.
func (g *globalFlags) resolve(env *cliEnv) (server, token, from string, err error) {
	server = firstNonEmpty(g.server, env.getenv("HERALD_URL"), defaultServer)
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", "", usagef("--server %q is not an http(s) URL such as %s", server, defaultServer)
	}
	switch {
	case g.token != "":
		token, from = g.token, "--token"
	case env.getenv("HERALD_TOKEN") != "":
		token, from = env.getenv("HERALD_TOKEN"), "HERALD_TOKEN"
	case isLocalHost(u.Hostname()):
		path := filepath.Join(firstNonEmpty(g.dataDir, env.getenv("HERALD_DATA_DIR"), "herald-data"), "admin.token")
		if b, err := os.ReadFile(path); err == nil {
			token = strings.TrimSpace(string(b))
			from = path
		}
	}
	if token == "" {
		from = ""
	}
	return strings.TrimRight(server, "/"), token, from, nil
}

func isLocalHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// parseFlags parses args into fs. What the flag package prints goes to
// stdout when help was asked for (-h, --help: help is the command's
// output, so `herald serve --help | less` shows it) and to fs.Output(),
// stderr, after a mistake (a diagnostic). Errors are usageErrors (exit
// code 2), help is flag.ErrHelp within one (exit code 0).
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	stderr := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	w := stderr
	if errors.Is(err, flag.ErrHelp) {
		w = stdout
	}
	if hint := didYouMean(fs, err); hint != "" {
		// Right under the flag package's first line, before the usage.
		first, rest, _ := strings.Cut(buf.String(), "\n")
		buf.Reset()
		fmt.Fprintf(&buf, "%s (%s)\n%s", first, hint, rest)
		err = fmt.Errorf("%w (%s)", err, hint)
	}
	if _, werr := buf.WriteTo(w); werr != nil && err == nil {
		return werr
	}
	if err != nil {
		return usageError{err}
	}
	return nil
}

// didYouMean names the known flag closest to the unknown one err reports
// ("did you mean --listen?"), or "" when none is within two edits.
func didYouMean(fs *flag.FlagSet, err error) string {
	const prefix = "flag provided but not defined: -"
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		return ""
	}
	typed := strings.TrimLeft(strings.TrimPrefix(err.Error(), prefix), "-")
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(typed, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return "did you mean --" + best + "?"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// parseArgs parses flags anywhere among args (the flag package stops at
// the first positional argument) and returns the positional ones; see
// parseFlags for where help goes.
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args, stdout); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// out prints v as one JSON line.
func (c *cli) out(v any) error {
	// Encode (not Marshal) so "<", ">" and "&" in filters stay readable;
	// the encoder ends the line.
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table starts a human table on stdout; call Flush when done.
func (c *cli) table(header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	if len(header) > 0 {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	return tw
}

func row(tw io.Writer, cols ...any) {
	s := make([]string, len(cols))
	for i, v := range cols {
		// One line per row: line breaks and tabs in values (response
		// excerpts, descriptions) would break the table.
		s[i] = strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return ' '
			}
			return r
		}, strings.TrimSpace(fmt.Sprint(v)))
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(tw, strings.Join(s, "\t"))
}

// confirm asks a yes/no question on stderr and reads the answer from
// stdin. Without a terminal on stdin it refuses: a script must say --yes.
func (c *cli) confirm(question string) (bool, error) {
	if !c.stdinTTY {
		return false, usagef("%s: pass --yes to confirm (stdin is not a terminal)", question)
	}
	fmt.Fprintf(c.stderr, "%s [y/N] ", question)
	line, err := bufio.NewReader(c.stdin).ReadString('\n')
	if err != nil && line == "" {
		return false, nil
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

// progress is a one-line progress bar on stderr, drawn only when stderr is
// a terminal: in a pipe or a log file it would be noise (and escape codes).
type progress struct {
	w       io.Writer
	on      bool
	label   string
	total   int64 // 0: unknown, the bar shows the count only
	last    time.Time
	drew    bool
	unitFmt func(int64) string
}

func (c *cli) newProgress(label string, total int64) *progress {
	return &progress{w: c.stderr, on: c.stderrTTY, label: label, total: total, unitFmt: func(n int64) string { return fmt.Sprint(n) }}
}

// barWidth is the bar's width in cells (40: fits an 80-column terminal
// with the label and counts).
const barWidth = 40

// set draws done out of total, at most every 100 ms unless final.
func (p *progress) set(done int64, final bool) {
	if !p.on {
		return
	}
	if !final && time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.drew = true
	if p.total <= 0 {
		fmt.Fprintf(p.w, "\r\x1b[K%s %s", p.label, p.unitFmt(done))
		return
	}
	done = min(done, p.total)
	n := int(done * barWidth / p.total)
	fmt.Fprintf(p.w, "\r\x1b[K%s [%s%s] %3d%% %s/%s", p.label, strings.Repeat("=", n), strings.Repeat(" ", barWidth-n),
		done*100/p.total, p.unitFmt(done), p.unitFmt(p.total))
}

// done ends the bar's line.
func (p *progress) done() {
	if p.on && p.drew {
		fmt.Fprintln(p.w)
	}
}

// parseTime reads an RFC 3339 time or a duration ago ("1h" = an hour ago).
func parseTime(flagName, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, usagef("--%s %q: want an RFC 3339 time (2025-01-02T15:04:05Z) or a duration ago (1h)", flagName, v)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	out := []string{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// jsonArg checks a flag value is JSON and returns it.
func jsonArg(flagName, v string) (json.RawMessage, error) {
	if !json.Valid([]byte(v)) {
		return nil, usagef("--%s is not valid JSON: %s", flagName, v)
	}
	return json.RawMessage(v), nil
}

// headerFlag collects repeatable --header K=V flags in order.
type headerFlag struct{ kv [][2]string }

func (h *headerFlag) String() string { return "" }
func (h *headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	h.kv = append(h.kv, [2]string{strings.TrimSpace(k), val})
	return nil
}

// maxListPages bounds the pages a list command reads when asked for "all"
// (0 = no --limit), so a typo cannot page through millions of rows.
const maxListPages = 1000

// listPages reads pages of up to 1000 items through fetch (given the page
// size and the cursor, "" for the first page) until the last page or limit
// items (0: all, up to maxListPages pages), printing each item as JSON
// with --json or as a table row with the header and cells given.
func listPages[T any](c *cli, limit int, header []string, fetch func(n int, cursor string) ([]T, *string, error), cells func(*T) []any) error {
	tw := c.table(header...)
	n, cursor := 0, ""
	for page := 0; page < maxListPages; page++ {
		want := 1000
		if limit > 0 {
			want = min(want, limit-n)
		}
		items, next, err := fetch(want, cursor)
		if err != nil {
			return err
		}
		for i := range items {
			if c.json {
				if err := c.out(&items[i]); err != nil {
					return err
				}
			} else {
				row(tw, cells(&items[i])...)
			}
		}
		n += len(items)
		if next == nil || (limit > 0 && n >= limit) {
			break
		}
		cursor = *next
	}
	if !c.json {
		return tw.Flush()
	}
	return nil
}
