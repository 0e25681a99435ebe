package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/delivery"
	webpushdest "github.com/heraldhq/herald/destination/webpush"
	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/internal/gctune"
	"github.com/heraldhq/herald/internal/proctune"
	"github.com/heraldhq/herald/maintenance"
	"github.com/heraldhq/herald/push"
	"github.com/heraldhq/herald/seal"
)

// config is every setting of herald serve/migrate. Each field has a flag
// --name, an environment variable HERALD_NAME (upper snake case) and a key
// "name" (or name with underscores) in the YAML file given by --config.
// Precedence: flag, then environment, then file, then default.
type config struct {
	Config      string
	Listen      string
	DebugListen string
	// PushListen and AdminListen take the push routes and the operator
	// routes off Listen onto listeners of their own (off when empty).
	PushListen  string
	AdminListen string
	// MaxConns, AdminMaxConns and PushMaxConns cap connections and push
	// sessions; 0 derives them from RLIMIT_NOFILE (listen.go).
	MaxConns          int
	AdminMaxConns     int
	PushMaxConns      int
	PushMaxConnsPerIP int
	// ReadTimeout bounds the arrival of a request's headers, then of its
	// body.
	ReadTimeout  time.Duration
	DataDir      string
	DatabaseURL  string
	Tiers        string
	Dev          bool
	AllowPrivate bool
	AllowCIDR    string
	// WebhookStdTransport sends plain-http webhooks through net/http's
	// Transport instead of the direct HTTP/1.1 path (ADR 0017).
	WebhookStdTransport bool
	APIToken            string
	MetricsToken        string
	// MetricsTenants are the tenants with their own /metrics label value
	// (comma-separated); others are counted as _other.
	MetricsTenants string
	Workers        int
	NodeID         string
	LogLevel       string
	LogFormat      string
	SQLiteSync     string
	IngestBatch    int
	IngestFlush    time.Duration
	IngestBusyWait time.Duration
	// IngestBatchYield: batch publishes commit one at a time for this long
	// after a single publish (ingest.Config.BatchYield).
	IngestBatchYield time.Duration
	IngestWorkers    int
	Direct           bool
	LeaseMargin      time.Duration
	PollInterval     time.Duration
	ShutdownWait     time.Duration
	// AutoDisableFailures and AutoDisableAfter are the server's
	// auto-disable rule (herald.AutoDisable); 0 failures turns it off for
	// every subscription.
	AutoDisableFailures int
	AutoDisableAfter    time.Duration
	MaxBodyBytes        int64
	SecretGrace         time.Duration
	// GCHeapFloor is the least heap goal of the garbage collector
	// (internal/gctune); 0 is off, and GOGC in the environment wins.
	GCHeapFloor int64
	// AdaptProcs is --adapt-procs: "auto" (on for PostgreSQL, off for
	// SQLite), "on" or "off"; GOMAXPROCS in the environment wins
	// (internal/proctune, ADR 0037).
	AdaptProcs string
	// SysmonAwake is --sysmon-awake: serve re-executes itself once with
	// GODEBUG=schedtrace set so Go's monitor thread skips its deep sleep
	// (internal/proctune, ADR 0040); a schedtrace in GODEBUG wins.
	SysmonAwake bool

	StaleAfter         time.Duration
	RetentionDelivered time.Duration
	RetentionDead      time.Duration
	RetentionEvents    time.Duration
	VacuumInterval     time.Duration

	Push                 bool
	PushCryptoKeys       string
	PushEndpointURL      string
	InternalListen       string
	InternalURL          string
	InternalTLSCert      string
	InternalTLSKey       string
	InternalTLSCA        string
	PushMsgLimit         int
	PushAckWait          time.Duration
	PushPingInterval     time.Duration
	PushHandshakeTimeout time.Duration
	PushBroadcastPoll    time.Duration
	PushIdleExpiry       time.Duration
	// PushLimits are the --push-max-* and --push-*-rate caps (push.go).
	PushLimits push.Limits

	UI bool
	// PublicURL is the base URL links herald hands out point at (portal
	// links); PortalFrameAncestors the origins allowed to embed /portal/.
	PublicURL            string
	PortalFrameAncestors string

	EncryptionKey     string
	EncryptionKeyFile string
	// VAPIDSubject is the sub of the VAPID JWTs of Web Push destinations.
	VAPIDSubject string

	tiers []time.Duration
	allow []netip.Prefix
	// metricsTenants is MetricsTenants parsed.
	metricsTenants []string
	// pgSchema, when set, is the PostgreSQL schema to use (created if
	// missing); herald bench runs in a schema of its own.
	pgSchema string
	// holdDelivery makes startHeraldNode leave the delivery engine stopped
	// (herald bench --drain starts it once everything is published).
	holdDelivery bool
	// keys seals subscription secrets and push.keys (nil without
	// --encryption-key / --encryption-key-file); set by validate.
	keys *seal.Ring
	// noLock opens SQLite without the data directory lock (herald secrets
	// rotate-key beside a serving herald).
	noLock bool
}

func defaultTiersString() string {
	parts := make([]string, len(delivery.DefaultTiers))
	for i, d := range delivery.DefaultTiers {
		parts[i] = herald.FormatDelay(d)
	}
	return strings.Join(parts, ",")
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.Config, "config", "", "YAML config file (keys are the flag names)")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address of the API, /metrics and health endpoints")
	fs.StringVar(&c.PushListen, "push-listen", "", "address of a listener of its own for the public Web Push routes (WebSocket on / and /push/ws, /wpush/, /m/), which --listen then no longer serves (off when empty)")
	fs.StringVar(&c.AdminListen, "admin-listen", "", "address of a listener of its own for the operator routes (/v1, /ui, /portal, /metrics, /openapi.json), which --listen then no longer serves (off when empty); /healthz and /readyz answer on every listener")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "most connections open at once on --listen and --push-listen together, push sessions included (0: derived from RLIMIT_NOFILE, see README \"Security\")")
	fs.IntVar(&c.AdminMaxConns, "admin-max-conns", 0, "most connections open at once on --admin-listen (0: derived from RLIMIT_NOFILE, at most 1024)")
	fs.IntVar(&c.PushMaxConns, "push-max-conns", 0, "most Web Push sessions at once on this node; more are answered 503 (0: derived from RLIMIT_NOFILE, see README \"Security\")")
	fs.IntVar(&c.PushMaxConnsPerIP, "push-max-conns-per-ip", push.DefaultMaxConnsPerIP, "most Web Push sessions at once from one client address (an IPv6 /64); more are answered 503 (0: no per-address cap)")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", httpapi.DefaultReadTimeout, "how long a request's headers may take to arrive, and then its body (WebSocket sessions excepted); a slower body is answered 408")
	fs.StringVar(&c.DebugListen, "debug-listen", "", "address of a separate listener serving Go's pprof profiles under /debug/pprof/ (off when empty; keep it on loopback: it has no authentication)")
	fs.StringVar(&c.DataDir, "data-dir", "./herald-data", "directory for the SQLite store and admin.token")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "postgres://… to use PostgreSQL instead of the embedded SQLite store")
	fs.StringVar(&c.Tiers, "tiers", defaultTiersString(), "retry tiers' maturity delays, comma-separated (one attempt per tier)")
	fs.BoolVar(&c.Dev, "dev", false, "development mode: allow delivery to loopback addresses and http:// Web Push endpoints")
	fs.BoolVar(&c.AllowPrivate, "allow-private", false, "allow delivery to private (RFC 1918, ULA, CGNAT) addresses")
	fs.BoolVar(&c.WebhookStdTransport, "webhook-std-transport", false, "send http:// webhooks through Go's net/http Transport instead of the direct HTTP/1.1 path (https always uses the Transport)")
	fs.StringVar(&c.AllowCIDR, "allow-cidr", "", "comma-separated CIDRs delivery may reach even if loopback/private (never link-local/metadata)")
	fs.StringVar(&c.APIToken, "api-token", "", "admin API token (default: generated on first start into <data-dir>/admin.token)")
	fs.StringVar(&c.MetricsToken, "metrics-token", "", "when set, GET /metrics needs \"Authorization: Bearer <token>\" (default: /metrics is open to anyone who reaches the listener)")
	fs.StringVar(&c.MetricsTenants, "metrics-tenants", "", "comma-separated tenants with their own label in /metrics' per-tenant series (others count as _other)")
	fs.IntVar(&c.Workers, "workers", delivery.DefaultWorkers, "concurrent delivery requests per node")
	fs.StringVar(&c.NodeID, "node-id", "", "name of this node in leases (default random); a node restarted with the same id re-sends its old leases at once (one live node per id)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text or json")
	fs.StringVar(&c.SQLiteSync, "sqlite-synchronous", "full", "SQLite synchronous mode: full (survives power loss) or normal (survives process crashes)")
	fs.IntVar(&c.IngestBatch, "ingest-max-batch", 1000, "most events in one group commit")
	fs.DurationVar(&c.IngestFlush, "ingest-flush-interval", 0, "how long a group commit waits for more events (0: flush when the committer is free)")
	fs.DurationVar(&c.IngestBatchYield, "ingest-batch-yield", ingest.DefaultBatchYield, "for this long after a single publish, batch publishes (batch API, broker sources) commit one at a time so imports cannot delay single publishes; negative: never")
	fs.DurationVar(&c.IngestBusyWait, "ingest-busy-wait", ingest.DefaultBusyWait, "with --ingest-flush-interval 0: how long a group commit waits for more events while publishers queue (the previous commit held 8 or more); negative: never")
	fs.IntVar(&c.IngestWorkers, "ingest-committers", 0, "concurrent group committers (default 1 on SQLite, 2 on PostgreSQL)")
	fs.BoolVar(&c.Direct, "direct-dispatch", true, "send fresh deliveries of unordered, unthrottled subscriptions without a claim when workers are free")
	fs.DurationVar(&c.LeaseMargin, "lease-margin", delivery.DefaultLeaseMargin, "added to a delivery's timeout to size its lease")
	fs.DurationVar(&c.PollInterval, "poll-interval", delivery.DefaultPollInterval, "longest a tier sleeps without checking the store")
	fs.DurationVar(&c.ShutdownWait, "shutdown-timeout", delivery.DefaultShutdownTimeout, "how long shutdown waits for running deliveries")
	fs.IntVar(&c.AutoDisableFailures, "auto-disable-failures", herald.DefaultAutoDisableFailures,
		"disable a subscription (reason failing) after this many failed attempts in a row, lasting at least --auto-disable-after (0: never, for every subscription; a subscription's auto_disable overrides otherwise)")
	fs.DurationVar(&c.AutoDisableAfter, "auto-disable-after", herald.DefaultAutoDisableAfter,
		"how long a streak of failed attempts must have lasted before --auto-disable-failures disables the subscription")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", 1<<20, "largest accepted request body (the batch API allows 16×)")
	fs.Int64Var(&c.GCHeapFloor, "gc-heap-floor", gctune.DefaultFloor, "bytes: while the live heap is small, let it grow to this before the garbage collector runs (fewer collections, less CPU per delivery; at most this much more memory); 0: Go's default pacing; ignored when GOGC is set")
	fs.StringVar(&c.AdaptProcs, "adapt-procs", "auto", "on: run Go on one core (GOMAXPROCS=1) while the node uses under 0.75 of a core, on every core once it uses over 0.85 of one (less CPU per delivery at low rates); auto: on with --database-url, off on SQLite (its commit's fsync would hold the only core); off; ignored when GOMAXPROCS is set")
	fs.BoolVar(&c.SysmonAwake, "sysmon-awake", true, "Linux: start once more with GODEBUG="+proctune.SysmonGODEBUG+" (same process id) so Go's monitor thread does not deep-sleep between deliveries and wake on the next system call (less CPU per delivery at low rates, ADR 0040); ignored when GODEBUG sets schedtrace")
	fs.DurationVar(&c.SecretGrace, "secret-grace", 24*time.Hour, "how long a rotated-out secret keeps signing")
	fs.DurationVar(&c.StaleAfter, "stale-after", 5*time.Minute, "raise herald.queue.stale when a tier's oldest due delivery waited this long (0: never)")
	fs.DurationVar(&c.RetentionDelivered, "retention-delivered", 72*time.Hour, "keep delivered, skipped, superseded and cancelled deliveries (and attempts) this long (0: for ever)")
	fs.DurationVar(&c.RetentionDead, "retention-dead", 30*24*time.Hour, "keep dead letters this long (0: for ever)")
	fs.DurationVar(&c.RetentionEvents, "retention-events", 7*24*time.Hour, "keep events with no delivery left this long; also the duplicate-id window (0: for ever)")
	fs.BoolVar(&c.Push, "push", true, "serve the Web Push service (autopush-compatible WebSocket on / and /push/ws, endpoints under /wpush/)")
	fs.StringVar(&c.PushCryptoKeys, "push-crypto-keys", "", "Fernet keys of push endpoint tokens, comma-separated: the first encrypts, all decrypt (default: generated on first start into <data-dir>/push.keys; every node sharing a store needs the same keys)")
	fs.StringVar(&c.PushEndpointURL, "push-endpoint-url", "", "public base URL of push endpoints, scheme://host[:port] (default http://<--listen address>); VAPID's aud must equal its origin")
	fs.StringVar(&c.InternalListen, "internal-listen", "", "address of the node-to-node listener for push hand-offs (off when empty: hand-offs to other nodes are impossible, so set it when several nodes share PostgreSQL; keep it on a private network)")
	fs.StringVar(&c.InternalURL, "internal-url", "", "URL other nodes use to reach --internal-listen (default http://<--internal-listen address>, https:// with --internal-tls-cert); required when --internal-listen has no host")
	fs.StringVar(&c.InternalTLSCert, "internal-tls-cert", "", "PEM certificate of this node for mutual TLS on the node-to-node listener and its hand-offs (with --internal-tls-key and --internal-tls-ca; off when empty)")
	fs.StringVar(&c.InternalTLSKey, "internal-tls-key", "", "PEM private key of --internal-tls-cert")
	fs.StringVar(&c.InternalTLSCA, "internal-tls-ca", "", "PEM CA certificates that sign every node's --internal-tls-cert: the only client and server certificates the node-to-node listener and hand-offs accept")
	fs.IntVar(&c.PushMsgLimit, "push-msg-limit", 150, "a session that reads more than this many stored messages of the backlog it connected to resets the user agent (it registers again); messages stored while it is connected never count")
	fs.DurationVar(&c.PushAckWait, "push-ack-wait", time.Second, "how long a message to a connected user agent waits for its ack before it is stored; the sender's 201 comes after either")
	fs.DurationVar(&c.PushPingInterval, "push-ping-interval", 300*time.Second, "WebSocket ping interval; broadcast changes go out on these ticks")
	fs.DurationVar(&c.PushHandshakeTimeout, "push-handshake-timeout", 5*time.Second, "how long a new WebSocket may take to send hello, and any later frame to arrive whole")
	fs.DurationVar(&c.PushBroadcastPoll, "push-broadcast-poll", 30*time.Second, "how often a node reloads broadcast versions set through another node")
	fs.DurationVar(&c.PushIdleExpiry, "push-idle-expiry", maintenance.DefaultPushIdleExpiry, "drop Web Push user agents that have not connected for this long; their endpoints then answer 410 (0: never)")
	c.pushLimitFlags(fs)
	fs.StringVar(&c.PublicURL, "public-url", "", "base URL users reach herald at, scheme://host[:port]; portal links point there (default http://<--listen address>)")
	fs.StringVar(&c.PortalFrameAncestors, "portal-frame-ancestors", "", "origins allowed to embed the consumer portal (/portal/) in an iframe, space-separated, e.g. \"https://app.example.com\" (default: none, no framing)")
	fs.BoolVar(&c.UI, "ui", true, "serve the web dashboard at /ui/ (and redirect GET / there) and the consumer portal at /portal/; they use the /v1 API with a token the user signs in with or a portal link")
	fs.StringVar(&c.EncryptionKey, "encryption-key", "", "encrypt subscription secrets (and push.keys) at rest: comma-separated keys, base64 of 32 bytes each (herald secrets generate-key); the first encrypts, all decrypt")
	fs.StringVar(&c.EncryptionKeyFile, "encryption-key-file", "", "file of encryption keys, one per line, the encrypting one first (# comments allowed); added after --encryption-key")
	fs.StringVar(&c.VAPIDSubject, "vapid-subject", webpushdest.DefaultSubject, "contact in the VAPID JWT of Web Push destinations, mailto: or https: (push services may write to it about your traffic)")
	fs.DurationVar(&c.VacuumInterval, "vacuum-interval", maintenance.DefaultVacuumInterval, "PostgreSQL: how often the leader vacuums the queue tables (0: never; leave it to autovacuum)")
}

// envName maps a flag name to its environment variable.
func envName(flagName string) string {
	return "HERALD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// load parses args, then fills every flag not given on the command line from
// the environment, then from the YAML file.
func (c *config) load(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args, os.Stdout); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName(f.Name), err))
			}
			set[f.Name] = true
		}
	})
	if c.Config != "" {
		raw, err := os.ReadFile(c.Config)
		if err != nil {
			return fmt.Errorf("error reading config file: %w", err)
		}
		var file map[string]any
		if err := yaml.Unmarshal(raw, &file); err != nil {
			return fmt.Errorf("error parsing config file %s: %w", c.Config, err)
		}
		for k, v := range file {
			name := strings.ReplaceAll(k, "_", "-")
			f := fs.Lookup(name)
			if f == nil {
				errs = append(errs, fmt.Errorf("config file %s: unknown key %q", c.Config, k))
				continue
			}
			if set[name] {
				continue
			}
			if err := fs.Set(name, yamlScalar(v)); err != nil {
				errs = append(errs, fmt.Errorf("config file %s: %s: %w", c.Config, k, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.validate()
}

func yamlScalar(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = yamlScalar(p)
		}
		return strings.Join(parts, ",")
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	default:
		return fmt.Sprint(x)
	}
}

func (c *config) validate() error {
	tiers, err := parseTiers(c.Tiers)
	if err != nil {
		return err
	}
	c.tiers = tiers
	if c.GCHeapFloor < 0 || c.GCHeapFloor > maxGCHeapFloor {
		return fmt.Errorf("--gc-heap-floor must be from 0 (off) to %d bytes, got %d", int64(maxGCHeapFloor), c.GCHeapFloor)
	}
	switch c.AdaptProcs {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("--adapt-procs must be auto, on or off, got %q", c.AdaptProcs)
	}
	if c.AutoDisableFailures < 0 || c.AutoDisableFailures > herald.MaxAutoDisableFailures {
		return fmt.Errorf("--auto-disable-failures must be from 0 (never) to %d, got %d", herald.MaxAutoDisableFailures, c.AutoDisableFailures)
	}
	if c.AutoDisableAfter < 0 || c.AutoDisableAfter > herald.MaxAutoDisableDuration {
		return fmt.Errorf("--auto-disable-after must be from 0s to %s, got %s", herald.MaxAutoDisableDuration, c.AutoDisableAfter)
	}
	c.metricsTenants = nil
	for _, s := range strings.Split(c.MetricsTenants, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !herald.ValidTenant(s) {
			return fmt.Errorf("--metrics-tenants: %q is not a tenant id (1-%d of A-Z a-z 0-9 . _ -)", s, herald.MaxTenantLen)
		}
		c.metricsTenants = append(c.metricsTenants, s)
	}
	if err := validVAPIDSubject(c.VAPIDSubject); err != nil {
		return err
	}
	c.allow = nil
	for _, s := range strings.Split(c.AllowCIDR, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("--allow-cidr: %q is not a CIDR prefix: %w", s, err)
		}
		c.allow = append(c.allow, p.Masked())
	}
	if c.DebugListen != "" {
		if _, _, err := net.SplitHostPort(c.DebugListen); err != nil {
			return fmt.Errorf("--debug-listen: %q is not host:port: %w", c.DebugListen, err)
		}
	}
	if set := btoi(c.InternalTLSCert != "") + btoi(c.InternalTLSKey != "") + btoi(c.InternalTLSCA != ""); set != 0 {
		if set != 3 {
			return errors.New("--internal-tls-cert, --internal-tls-key and --internal-tls-ca go together")
		}
		if c.InternalListen == "" {
			return errors.New("--internal-tls-cert needs --internal-listen")
		}
		if c.InternalURL != "" && !strings.HasPrefix(c.InternalURL, "https://") {
			return fmt.Errorf("--internal-url must start with https:// with --internal-tls-cert, got %q", c.InternalURL)
		}
	}
	if c.InternalListen != "" {
		host, _, err := net.SplitHostPort(c.InternalListen)
		if err != nil {
			return fmt.Errorf("--internal-listen: %q is not host:port: %w", c.InternalListen, err)
		}
		if ip := net.ParseIP(host); c.InternalURL == "" && (host == "" || ip != nil && ip.IsUnspecified()) {
			// Other nodes cannot call http://[::]:port: each must be told
			// the address it is reached at.
			return fmt.Errorf("--internal-listen %q listens on every address: set --internal-url to the URL other nodes reach this node at", c.InternalListen)
		}
	}
	for name, addr := range map[string]string{"--push-listen": c.PushListen, "--admin-listen": c.AdminListen} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s: %q is not host:port: %w", name, addr, err)
		}
	}
	if c.PushListen != "" && !c.Push {
		return errors.New("--push-listen needs --push (the Web Push service is off)")
	}
	for name, n := range map[string]int{
		"--max-conns": c.MaxConns, "--admin-max-conns": c.AdminMaxConns,
		"--push-max-conns": c.PushMaxConns, "--push-max-conns-per-ip": c.PushMaxConnsPerIP,
	} {
		if n < 0 {
			return fmt.Errorf("%s must not be negative (0: derived, or no per-address cap), got %d", name, n)
		}
	}
	if c.ReadTimeout <= 0 {
		return fmt.Errorf("--read-timeout must be positive, got %s", c.ReadTimeout)
	}
	if c.PushMsgLimit < 1 {
		return fmt.Errorf("--push-msg-limit must be at least 1, got %d", c.PushMsgLimit)
	}
	if err := c.validatePushLimits(); err != nil {
		return err
	}
	for name, d := range map[string]time.Duration{
		"--push-ack-wait": c.PushAckWait, "--push-ping-interval": c.PushPingInterval,
		"--push-handshake-timeout": c.PushHandshakeTimeout, "--push-broadcast-poll": c.PushBroadcastPoll,
	} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, got %s", name, d)
		}
	}
	for name, u := range map[string]string{"--push-endpoint-url": c.PushEndpointURL, "--internal-url": c.InternalURL, "--public-url": c.PublicURL} {
		if u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return fmt.Errorf("%s must start with http:// or https://, got %q", name, u)
		}
	}
	if err := validFrameAncestors(c.PortalFrameAncestors); err != nil {
		return fmt.Errorf("--portal-frame-ancestors: %w", err)
	}
	if c.Workers < 1 {
		return fmt.Errorf("--workers must be at least 1, got %d", c.Workers)
	}
	for name, d := range map[string]time.Duration{
		"--stale-after": c.StaleAfter, "--retention-delivered": c.RetentionDelivered,
		"--retention-dead": c.RetentionDead, "--retention-events": c.RetentionEvents,
		"--vacuum-interval": c.VacuumInterval, "--push-idle-expiry": c.PushIdleExpiry,
	} {
		if d < 0 {
			return fmt.Errorf("%s must not be negative (0 disables it), got %s", name, d)
		}
	}
	switch c.SQLiteSync {
	case "full", "normal":
	default:
		return fmt.Errorf("--sqlite-synchronous must be full or normal, got %q", c.SQLiteSync)
	}
	keys, err := c.keyRing()
	if err != nil {
		return err
	}
	c.keys = keys
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		return fmt.Errorf("--database-url must start with postgres:// or postgresql://")
	}
	return nil
}

// keyRing builds the encryption key ring from --encryption-key and then
// --encryption-key-file (nil when neither is set).
func (c *config) keyRing() (*seal.Ring, error) {
	keys, err := seal.ParseKeyList(c.EncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("--encryption-key: %w", err)
	}
	if c.EncryptionKeyFile != "" {
		b, err := os.ReadFile(c.EncryptionKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--encryption-key-file: %w", err)
		}
		more, err := seal.ParseKeyFile(b)
		if err != nil {
			return nil, fmt.Errorf("--encryption-key-file %s: %w", c.EncryptionKeyFile, err)
		}
		if len(more) == 0 {
			return nil, fmt.Errorf("--encryption-key-file %s holds no key", c.EncryptionKeyFile)
		}
		keys = append(keys, more...)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	r, err := seal.NewRing(keys...)
	if err != nil {
		return nil, fmt.Errorf("--encryption-key: %w", err)
	}
	return r, nil
}

// parseTiers parses "0s,5s,1m": at least one tier, none negative, at most 100.
func parseTiers(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		d, err := time.ParseDuration(p)
		if err != nil {
			return nil, fmt.Errorf("--tiers: %q is not a duration (like 0s, 5s, 1m, 2h): %w", p, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("--tiers: %q is negative", p)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("--tiers: at least one tier is required")
	}
	if len(out) > 100 {
		return nil, errors.New("--tiers: at most 100 tiers")
	}
	return out, nil
}

// validFrameAncestors accepts space-separated origins (scheme://host[:port],
// a host may start with "*.") and 'self': what goes into the portal's CSP
// frame-ancestors, so nothing else (no ';' or ',') may reach the header.
func validFrameAncestors(v string) error {
	for _, o := range strings.Fields(v) {
		if o == "'self'" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil ||
			strings.ContainsAny(o, ";,'\"") {
			return fmt.Errorf("%q is not an origin like https://app.example.com", o)
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// autoDisable is the server's auto-disable rule from
// --auto-disable-failures and --auto-disable-after.
func (c *config) autoDisable() *herald.AutoDisable {
	return &herald.AutoDisable{
		ConsecutiveFailures: c.AutoDisableFailures,
		MinDurationS:        int64(c.AutoDisableAfter / time.Second),
	}
}

// maxGCHeapFloor bounds --gc-heap-floor: 16 GiB.
const maxGCHeapFloor = 16 << 30
