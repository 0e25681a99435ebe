package bench

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/mattn/go-sqlite3" // the relay's SQLite store
)

// The relay's limits: a publish body of at most relayMaxBody bytes, and at
// most relayMaxBatch bodies in one insert (the group commit).
const (
	relayMaxBody  = 1 << 20
	relayMaxBatch = 500
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// To is the receiver's base URL: each stored body is POSTed to To +
	// "/hook".
	To string
	// DatabaseURL, when set, stores bodies in PostgreSQL (the caller checks
	// that it is loopback), in a fresh schema dropped when Serve ends;
	// otherwise in a SQLite file in Dir.
	DatabaseURL string
	Dir         string
}

// Relay is the floor of `herald bench --steady --floor`: the least a
// webhook relay that acknowledges only what is stored must do per event,
// and nothing else — read a POST /publish body, insert it (a group commit
// of what is queued, no wait: one event at steady rates, up to
// relayMaxBatch when saturated; SQLite in WAL with synchronous=FULL as
// herald's ingest, or PostgreSQL in one implicit transaction), answer 202,
// and POST the body to the receiver. No authentication, parsing,
// matching, signing, delivery rows, completions, retries or metrics.
// Run in a process of its own, its CPU per delivery at a rate, beside its
// saturated figure, is what this machine charges any such service for the
// rate; herald's figures over it are herald's own.
type Relay struct {
	cfg    RelayConfig
	queue  chan relayReq
	insert func(ctx context.Context, bodies [][]byte) error
	close  func()
	client *http.Client
	srv    *http.Server
	wg     sync.WaitGroup
}

type relayReq struct {
	body []byte
	done chan error
}

// NewRelay opens the relay's store (a table of its own).
func NewRelay(ctx context.Context, cfg RelayConfig) (*Relay, error) {
	if err := CheckLoopback(cfg.To); err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:    cfg,
		queue:  make(chan relayReq, 4096),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, Proxy: nil}, Timeout: 30 * time.Second},
	}
	var err error
	if cfg.DatabaseURL != "" {
		err = r.openPostgres(ctx)
	} else {
		err = r.openSQLite(ctx)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Relay) openSQLite(ctx context.Context) error {
	if r.cfg.Dir == "" {
		return errors.New("relay: a SQLite relay needs a directory")
	}
	dsn := "file:" + filepath.Join(r.cfg.Dir, "relay.db") + "?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=5000"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS relay_events (id INTEGER PRIMARY KEY, data BLOB NOT NULL)`); err != nil {
		db.Close()
		return fmt.Errorf("relay: %w", err)
	}
	// One statement is one implicit transaction: no BEGIN or COMMIT round,
	// and a context that cannot end starts no goroutine in the driver.
	r.insert = func(_ context.Context, bodies [][]byte) error {
		q := "INSERT INTO relay_events (data) VALUES " + strings.TrimSuffix(strings.Repeat("(?),", len(bodies)), ",")
		args := make([]any, len(bodies))
		for i, b := range bodies {
			args[i] = b
		}
		_, err := db.ExecContext(context.Background(), q, args...)
		return err
	}
	r.close = func() { db.Close() }
	return nil
}

func (r *Relay) openPostgres(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, r.cfg.DatabaseURL)
	if err != nil {
		return err
	}
	// Named after this process, so a relay killed before it could drop
	// its schema leaves one that tells whose it was; a later relay with
	// the same process id (the first is gone) drops it first.
	schema := pgx.Identifier{RelaySchema(os.Getpid())}.Sanitize()
	table := schema + ".relay_events"
	if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE; CREATE SCHEMA `+schema+`; CREATE TABLE `+table+` (id bigserial PRIMARY KEY, data bytea NOT NULL)`); err != nil {
		pool.Close()
		return fmt.Errorf("relay: %w", err)
	}
	one := `INSERT INTO ` + table + ` (data) VALUES ($1)`
	many := `INSERT INTO ` + table + ` (data) SELECT * FROM unnest($1::bytea[])`
	r.insert = func(ctx context.Context, bodies [][]byte) error {
		var err error
		if len(bodies) == 1 {
			_, err = pool.Exec(ctx, one, bodies[0])
		} else {
			_, err = pool.Exec(ctx, many, bodies)
		}
		return err
	}
	r.close = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`)
		pool.Close()
	}
	return nil
}

// RelaySchema is the PostgreSQL schema of the relay in process pid.
func RelaySchema(pid int) string { return "herald_relay_" + strconv.Itoa(pid) }

// Serve answers on ln until ctx ends, then closes the store.
func (r *Relay) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /publish", r.publish)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// The commit loop outlives ctx until the server has shut down: the
	// handlers still waiting on a commit are answered first.
	commitCtx, stopCommit := context.WithCancel(context.WithoutCancel(ctx))
	r.wg.Add(1)
	go r.commitLoop(commitCtx)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(sctx)
	}()
	err := r.srv.Serve(ln)
	stopCommit()
	r.wg.Wait()
	r.close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (r *Relay) publish(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, relayMaxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rq := relayReq{body: body, done: make(chan error, 1)}
	select {
	case r.queue <- rq:
	case <-req.Context().Done():
		return
	}
	if err := <-rq.done; err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// commitLoop is the group commit: it takes a request, then whatever else is
// queued (up to relayMaxBatch), inserts them in one statement, answers
// each, and starts one send per stored body.
func (r *Relay) commitLoop(ctx context.Context) {
	defer r.wg.Done()
	batch := make([]relayReq, 0, relayMaxBatch)
	bodies := make([][]byte, 0, relayMaxBatch)
	for {
		batch, bodies = batch[:0], bodies[:0]
		select {
		case rq := <-r.queue:
			batch = append(batch, rq)
		case <-ctx.Done():
			return
		}
	more:
		for len(batch) < relayMaxBatch {
			select {
			case rq := <-r.queue:
				batch = append(batch, rq)
			default:
				break more
			}
		}
		for _, rq := range batch {
			bodies = append(bodies, rq.body)
		}
		err := r.insert(ctx, bodies)
		for _, rq := range batch {
			rq.done <- err
			if err == nil {
				go r.send(rq.body)
			}
		}
	}
}

// send POSTs one stored body to the receiver; the floor has no retries.
func (r *Relay) send(body []byte) {
	resp, err := r.client.Post(r.cfg.To+"/hook", "application/json", bytes.NewReader(body))
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
