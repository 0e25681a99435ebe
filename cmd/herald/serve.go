package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/heraldhq/herald/delivery"
	"github.com/heraldhq/herald/destination"
	"github.com/heraldhq/herald/eventtype"
	"github.com/heraldhq/herald/httpapi"
	"github.com/heraldhq/herald/ingest"
	"github.com/heraldhq/herald/maintenance"
	"github.com/heraldhq/herald/metrics"
	"github.com/heraldhq/herald/openapi"
	"github.com/heraldhq/herald/store"
	"github.com/heraldhq/herald/store/postgres"
	"github.com/heraldhq/herald/store/sqlite"
	"github.com/heraldhq/herald/ui"
	"github.com/heraldhq/herald/webhook"
)

func newLogger(c *config) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch c.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", c.LogFormat)
}

// openStore opens and migrates the configured store.
func openStore(ctx context.Context, c *config) (store.Store, error) {
	var s store.Store
	if c.DatabaseURL != "" {
		pg, err := postgres.Open(ctx, postgres.Config{URL: c.DatabaseURL, Schema: c.pgSchema, Keys: c.keys})
		if err != nil {
			return nil, fmt.Errorf("error opening PostgreSQL: %w", err)
		}
		s = pg
	} else {
		if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("error creating data directory: %w", err)
		}
		lite, err := sqlite.Open(ctx, sqlite.Config{
			Path:        filepath.Join(c.DataDir, "herald.db"),
			Synchronous: c.SQLiteSync,
			Keys:        c.keys,
			NoLock:      c.noLock,
		})
		if err != nil {
			return nil, err
		}
		s = lite
	}
	if err := s.Migrate(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("error migrating: %w", err)
	}
	return s, nil
}

func cmdMigrate(ctx context.Context, args []string) error {
	c := &config{}
	fs := flag.NewFlagSet("herald migrate", flag.ContinueOnError)
	c.flags(fs)
	fs.Usage = func() { migrateUsage(fs) }
	if err := c.load(fs, args); err != nil {
		return err
	}
	s, err := openStore(ctx, c)
	if err != nil {
		return err
	}
	fmt.Println("migrations applied")
	return s.Close()
}

// migrateFlags are the flags migrate uses: where the store is and how to
// open it (openStore).
var migrateFlags = []string{"config", "data-dir", "database-url", "sqlite-synchronous", "encryption-key", "encryption-key-file"}

// migrateUsage lists only migrateFlags. migrate still accepts every serve
// flag, so the two can share a config file, environment and command line.
func migrateUsage(fs *flag.FlagSet) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	for _, name := range migrateFlags {
		f := fs.Lookup(name)
		shown.Var(f.Value, f.Name, f.Usage)
		shown.Lookup(name).DefValue = f.DefValue // not a value parsed before --help
	}
	fmt.Fprintf(fs.Output(), "Usage: herald migrate [flags]\n\nApplies the store's schema migrations and exits (herald serve applies them too).\nherald serve's other flags are accepted and have no effect.\n\nFlags:\n")
	shown.PrintDefaults()
}

// ensureToken makes sure an admin token exists. With --api-token nothing is
// stored. Otherwise the first start generates one, stores its hash and
// writes it to <data-dir>/admin.token (mode 0600). tokenFile is that file
// when it is there, for the sign-in hint (dashboardHint).
func ensureToken(ctx context.Context, c *config, s store.Store, logger *slog.Logger) (tokenFile string, err error) {
	if c.APIToken != "" {
		return "", nil
	}
	n, err := s.APITokenCount(ctx)
	if err != nil {
		return "", fmt.Errorf("error reading API tokens: %w", err)
	}
	path := filepath.Join(c.DataDir, "admin.token")
	if n > 0 {
		if _, err := os.Stat(path); err != nil {
			logger.Warn("an admin token exists in the store but not in the data directory; pass --api-token or restore the file", "path", path)
			return "", nil
		}
		return path, nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	token := "hrld_" + base64.RawURLEncoding.EncodeToString(b[:])
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return "", fmt.Errorf("error creating data directory: %w", err)
	}
	// Write the file first: a token stored but never shown would lock the
	// operator out.
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("error writing admin token: %w", err)
	}
	if err := s.APITokenCreate(ctx, &store.APITokenCreateParams{Hash: httpapi.HashToken(token), Now: time.Now().UTC()}); err != nil {
		return "", fmt.Errorf("error storing admin token: %w", err)
	}
	logger.Info("generated the admin API token", "path", path)
	return path, nil
}

// dashboardHint is the line serve logs once on start, so a new user
// finds the dashboard and knows how to sign in. addr is the listener
// serving /ui/; a wildcard host is shown as 127.0.0.1, where a browser on
// this machine reaches it.
func dashboardHint(addr net.Addr, c *config, tokenFile string) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		host, port = addr.String(), ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port) + "/ui/"
	switch {
	case tokenFile != "":
		return "dashboard: " + url + " — sign in with the token in " + tokenFile
	case c.APIToken != "":
		return "dashboard: " + url + " — sign in with the --api-token value"
	}
	return "dashboard: " + url + " — sign in with an admin token"
}

func cmdServe(ctx context.Context, args []string) error {
	c := &config{}
	fs := flag.NewFlagSet("herald serve", flag.ContinueOnError)
	c.flags(fs)
	if err := c.load(fs, args); err != nil {
		return err
	}
	// Before anything is opened: on success this process starts again.
	sysmonErr := keepSysmonAwake(c)
	logger, err := newLogger(c)
	if err != nil {
		return err
	}
	if sysmonErr != nil {
		logger.Warn("--sysmon-awake is off for this run", "err", sysmonErr)
	}
	stopGC := tuneGC(c, logger)
	defer stopGC()
	stopProcs := tuneProcs(c, logger)
	defer stopProcs()
	n, err := startHeraldNode(ctx, c, logger)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-n.errc:
		if !errors.Is(err, http.ErrServerClosed) {
			logger.Error("HTTP server failed", "err", err)
		}
	}
	n.stop()
	logger.Info("stopped")
	return nil
}

// heraldNode is a running herald: store, ingest, delivery engine and HTTP API.
// serve runs one until a signal; bench runs one in-process.
type heraldNode struct {
	cfg    *config
	store  store.Store
	ingest *ingest.Ingester
	engine *delivery.Engine
	// destinations is what the engine sends through; closed (broker
	// connections) once the engine stopped.
	destinations *destination.Router
	// srvs serve --listen and, when set, --push-listen and --admin-listen.
	srvs []*http.Server
	// ln is the listener of the API (--admin-listen, else --listen).
	ln net.Listener
	// errc receives an HTTP server's error when it stops serving.
	errc chan error
	// maint runs retention and staleness alarms (when leader).
	maint *maintenance.Maintainer
	// stopListen ends the LISTEN/NOTIFY wake-ups and waits for them.
	stopListen func()
	// debug serves pprof on --debug-listen (nil when off).
	debug *http.Server
	// push is the Web Push service (nil with --push=false).
	push *pushNode
	// stopSources stops the broker source consumers (each settles the
	// batch it holds) and waits for them.
	stopSources func()
}

// URL is the node's API base URL.
func (n *heraldNode) URL() string { return "http://" + n.ln.Addr().String() }

// startHeraldNode opens the store, wires ingest, delivery and the API as
// configured by c, and starts serving on c.Listen (and c.PushListen,
// c.AdminListen when set).
func startHeraldNode(ctx context.Context, c *config, logger *slog.Logger) (*heraldNode, error) {
	// Listen first: an occupied port then fails before anything is
	// created (the data directory, the store, the admin token).
	limits := resolveConnLimits(c, fileLimit())
	lns, err := listenAll(c, limits)
	if err != nil {
		return nil, err
	}
	s, err := openStore(ctx, c)
	if err != nil {
		lns.close()
		return nil, err
	}
	if err := checkSecrets(ctx, c, s, logger); err != nil {
		lns.close()
		_ = s.Close()
		return nil, err
	}
	tokenFile, err := ensureToken(ctx, c, s, logger)
	if err != nil {
		lns.close()
		_ = s.Close()
		return nil, err
	}
	if err := clampTiers(ctx, s, len(c.tiers), logger); err != nil {
		lns.close()
		_ = s.Close()
		return nil, err
	}

	vapid := storeVAPIDKeys(s)
	ensureVAPID(ctx, vapid, logger)

	guard := &webhook.Guard{AllowLoopback: c.Dev, AllowPrivate: c.AllowPrivate, Allow: c.allow}
	userAgent := "herald/" + version
	sender := webhook.NewSender(webhook.Config{Guard: guard, UserAgent: userAgent, StdTransport: c.WebhookStdTransport})
	destinations, listeners := newDestinations(c, s, sender, userAgent, logger)

	committers := c.IngestWorkers
	if committers <= 0 {
		// SQLite has one writer. On PostgreSQL two committers overlap one
		// commit's round trip with the next group's; four made smaller
		// groups and cost PostgreSQL more CPU per event (docs/benchmarks.md,
		// "Ingest committers on PostgreSQL").
		committers = 1
		if c.DatabaseURL != "" {
			committers = 2
		}
	}
	// One registry per node (no global registry); the observer feeds it
	// from ingest, delivery and maintenance.
	reg := prometheus.NewRegistry()
	history := metrics.NewHistory(nil)
	obs := metrics.NewObserver(reg).WithHistory(history).WithTenants(c.metricsTenants)

	// The fan-out cache is shared: ingest routes published events with it,
	// the engine routes system events (alerts).
	fanout := ingest.NewFanout(s, logger)
	fanout.SetSystemEventObserver(obs)
	engine := delivery.New(delivery.Config{
		Store:           s,
		Sender:          destinations,
		Fanout:          fanout,
		Tiers:           c.tiers,
		Workers:         c.Workers,
		LeaseMargin:     c.LeaseMargin,
		PollInterval:    c.PollInterval,
		ShutdownTimeout: c.ShutdownWait,
		NodeID:          c.NodeID,
		Logger:          logger,
		Observer:        obs,
		AutoDisable:     c.autoDisable(),
	})
	// Before anything leases (direct dispatch leases at commit, the engine
	// when it claims): the node's liveness is held, and what a dead
	// process left in flight is pending again (store/liveness.go).
	if err := holdLiveness(ctx, s, engine.NodeID(), logger); err != nil {
		lns.close()
		_ = s.Close()
		return nil, err
	}
	var dispatcher ingest.Dispatcher
	if c.Direct {
		dispatcher = engine
	}
	ing := ingest.New(ingest.Config{
		Store:         s,
		Fanout:        fanout,
		Tier0Delay:    c.tiers[0],
		MaxBatch:      c.IngestBatch,
		FlushInterval: c.IngestFlush,
		BusyWait:      c.IngestBusyWait,
		BatchYield:    c.IngestBatchYield,
		Committers:    committers,
		OnCommit:      func() { engine.NotifyTiers(store.TierBit(0)) }, // fresh deliveries are tier 0's
		Dispatcher:    dispatcher,
		Logger:        logger,
		Observer:      obs,
	})
	// One schema cache for the API's publishes and the sources'.
	catalog := eventtype.NewCatalog(s, eventtype.DefaultPoll, logger)
	// Broker sources publish through the ingester (runSources below).
	sources := newSources(c, s, ing, catalog, engine.NodeID(), metrics.NewSourceObserver(reg), logger)
	maint := maintenance.New(maintenance.Config{
		Store:      s,
		Publisher:  ing,
		Tiers:      len(c.tiers),
		StaleAfter: c.StaleAfter,
		Retention: maintenance.Retention{
			Delivered: c.RetentionDelivered,
			Dead:      c.RetentionDead,
			Events:    c.RetentionEvents,
		},
		VacuumInterval: c.VacuumInterval,
		PushIdleExpiry: c.PushIdleExpiry,
		Observer:       obs,
		Logger:         logger,
	})

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(metrics.NewStatsCollector(s, len(c.tiers)))
	reg.MustRegister(metrics.NewFilterCollector())

	ps, err := startPush(c, s, lns.pushLn(), limits, reg, logger)
	if err != nil {
		lns.close()
		_ = s.Close()
		return nil, err
	}
	var broadcaster httpapi.PushBroadcaster
	if ps != nil {
		broadcaster = ps.srv
	}

	extra := map[string]http.Handler{"GET /openapi.json": openapi.Handler()}
	if c.UI {
		// The dashboard, and the root sending browsers to it. The push
		// server's Wrap takes WebSocket upgrades at / before these run.
		extra["GET /ui/"] = ui.New("/ui/")
		extra["GET /{$}"] = ui.Redirect("/ui/")
		// The consumer portal: the same pages confined to a tenant by the
		// session its one-time link is exchanged for (ADR 0015).
		extra["GET /portal/"] = ui.NewPortal("/portal/", strings.Fields(c.PortalFrameAncestors))
	}
	if c.Dev {
		// The Web Push demo page: a developer's tool, never in production.
		extra["GET "+ui.PushDemoPrefix] = ui.PushDemo()
	}
	api := httpapi.New(httpapi.Config{
		Extra:          extra,
		Store:          s,
		Publisher:      ing,
		Notify:         engine.Notify,
		SourcesChanged: sources.Kick,
		Catalog:        catalog,
		Tiers:          c.tiers,
		AutoDisable:    c.autoDisable(),
		Auth:           httpapi.NewTokenAuth(s, c.APIToken),
		Metrics:        promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		MetricsToken:   c.MetricsToken,
		Logger:         logger,
		MaxBodyBytes:   c.MaxBodyBytes,
		SecretGrace:    c.SecretGrace,
		Push:           broadcaster,
		WebPush:        webPushKeys(vapid),
		Listen:         listeners,
		History:        historyView{history},
		UserAgent:      userAgent,
		PublicURL:      publicURL(c, lns.api()),
		// --dev: a push service on the machine may serve http endpoints.
		AllowHTTPPushEndpoints: c.Dev,
	})

	var handler http.Handler = api
	if ps != nil {
		handler = ps.srv.Wrap(api)
	}
	// Each listener serves its share of the routes (listen.go); with
	// neither --push-listen nor --admin-listen, --listen serves them all.
	mainClasses := []routeClass{}
	if lns.push == nil {
		mainClasses = append(mainClasses, classPush)
	}
	if lns.admin == nil {
		mainClasses = append(mainClasses, classAdmin)
	}
	servers := []servedListener{{newHTTPServer(c, serveOnly(handler, mainClasses...)), lns.main}}
	if lns.push != nil {
		servers = append(servers, servedListener{newHTTPServer(c, serveOnly(handler, classPush)), lns.push})
	}
	if lns.admin != nil {
		servers = append(servers, servedListener{newHTTPServer(c, serveOnly(handler, classAdmin)), lns.admin})
	}
	var debug *http.Server
	if c.DebugListen != "" {
		dln, err := net.Listen("tcp", c.DebugListen)
		if err != nil {
			lns.close()
			ps.close()
			_ = s.Close()
			return nil, fmt.Errorf("error listening on %s (--debug-listen): %w", c.DebugListen, err)
		}
		debug = &http.Server{Handler: debugHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = debug.Serve(dln) }()
		logger.Info("pprof serving", "listen", dln.Addr().String())
	}

	ing.Start()
	// Broker sources publish through the ingester: started after it,
	// stopped before it closes (heraldNode.stop).
	stopSources := runSources(sources)
	if !c.holdDelivery {
		engine.Start()
	}
	maint.Start()
	// PostgreSQL: other nodes' commits wake this one (polling stays the
	// fallback).
	listenCtx, stopListen := context.WithCancel(context.Background())
	listenDone := make(chan struct{})
	if nf, ok := s.(store.Notifier); ok {
		go func() {
			defer close(listenDone)
			_ = nf.Listen(listenCtx, engine.NotifyTiers)
		}()
	} else {
		close(listenDone)
	}
	storeName := "sqlite:" + filepath.Join(c.DataDir, "herald.db")
	if c.DatabaseURL != "" {
		storeName = "postgres"
	}
	if ps != nil {
		logger.Info("web push serving", "endpoint_url", ps.srv.EndpointURL(), "node", ps.nodeID, "internal_listen", ps.internalAddr())
	}
	logger.Info("herald serving", "version", version, "listen", lns.main.Addr().String(),
		"push_listen", lns.addr(lns.push), "admin_listen", lns.addr(lns.admin), "store", storeName,
		"tiers", strings.Split(c.Tiers, ","), "workers", c.Workers, "node", engine.NodeID(), "dev", c.Dev)
	limits.log(logger)
	logger.Info(dashboardHint(lns.api().Addr(), c, tokenFile))

	n := &heraldNode{cfg: c, store: s, ingest: ing, engine: engine, destinations: destinations, ln: lns.api(), errc: make(chan error, len(servers)),
		maint: maint, stopListen: func() { stopListen(); <-listenDone }, debug: debug, push: ps, stopSources: stopSources}
	for _, sl := range servers {
		n.srvs = append(n.srvs, sl.srv)
		go func() { n.errc <- sl.srv.Serve(sl.ln) }()
	}
	return n, nil
}

// holdLiveness marks this node alive in the store for as long as it runs,
// and logs the deliveries it rescued from a previous process: on SQLite
// every one left in flight (one process owns the data directory), on
// PostgreSQL those leased under this node's id (a restart with the same
// --node-id). Other nodes' dead processes are rescued by the engine
// (delivery.Config.LivenessInterval).
func holdLiveness(ctx context.Context, s store.Store, nodeID string, logger *slog.Logger) error {
	n, err := s.NodeLivenessHold(ctx, &store.NodeLivenessHoldParams{NodeID: nodeID, Now: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("error holding node liveness for %s: %w", nodeID, err)
	}
	if n > 0 {
		logger.Info("rescued deliveries left in flight by a previous process", "count", n, "node", nodeID)
	}
	return nil
}

// clampTiers moves the unfinished deliveries of tiers beyond the
// configured ones to the last configured tier, and logs what it moved: no
// loop claims a tier that is no longer configured, so after --tiers shrank
// they would wait for good. All nodes sharing a store should run the same
// tiers; a node with more would keep filling the higher ones.
func clampTiers(ctx context.Context, s store.Store, tiers int, logger *slog.Logger) error {
	res, err := s.DeliveryTierClamp(ctx, &store.DeliveryTierClampParams{Tiers: tiers, Now: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("error moving deliveries of removed tiers: %w", err)
	}
	from := make([]int, 0, len(res.Moved))
	for tier := range res.Moved {
		from = append(from, tier)
	}
	slices.Sort(from)
	for _, tier := range from {
		logger.Warn("moved deliveries of a tier no longer configured to the last tier",
			"from_tier", tier, "to_tier", res.To, "count", res.Moved[tier])
	}
	return nil
}

// stop shuts the node down in order: stop taking requests (publishes in
// flight finish), commit what was queued, stop delivering (release what is
// held), close the store.
func (n *heraldNode) stop() {
	shCtx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownWait+5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range n.srvs {
		wg.Go(func() { _ = srv.Shutdown(shCtx) })
	}
	wg.Wait()
	if n.debug != nil {
		_ = n.debug.Close()
	}
	// Push sessions are hijacked connections Shutdown does not wait for:
	// close them (unacked messages are stored) while the store is open.
	n.push.close()
	// Consumers stop before the ingester closes: a batch they hold
	// commits and is acknowledged, or is left to the broker to redeliver.
	n.stopSources()
	n.maint.Stop()
	n.ingest.Close()
	n.engine.Stop()
	n.destinations.Close()
	n.stopListen()
	_ = n.store.Close()
}

// debugHandler serves Go's runtime profiles (net/http/pprof) on their
// usual paths, on a mux of its own: the API listener never serves them.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// publicURL is --public-url, else http://<listen address>; on an
// unspecified address (0.0.0.0) it is "", and links use the request's host.
func publicURL(c *config, ln net.Listener) string {
	if c.PublicURL != "" {
		return c.PublicURL
	}
	if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil && net.ParseIP(host).IsUnspecified() {
		return ""
	}
	return "http://" + ln.Addr().String()
}
