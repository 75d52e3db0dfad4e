package scheduler

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/par"
	"github.com/batonhq/baton/internal/sqldialect"
	"github.com/batonhq/baton/outbox"
)

//go:embed sql
var sqlFiles embed.FS

// Dialect is the SQL dialect of a store's database.
type Dialect = sqldialect.Dialect

const (
	Postgres = sqldialect.Postgres
	SQLite   = sqldialect.SQLite
)

// Store is the durable schedule: job definitions with their next tick, the
// ticks with their outcomes, and each tick's attempts. It runs the same
// statements on PostgreSQL and SQLite, written once in sql/ with a few
// macros that the dialect fills in (see internal/sqldialect).
type Store struct {
	db      *sql.DB
	dialect Dialect
	schema  string
	q       map[string]string
	outbox  *outbox.Store // where run notifications go (notify)
	// listed is how many jobs the last listing read (listJobs): the next
	// one's first chunk is made that size, and is then the whole listing.
	listed atomic.Int64
}

// NewStore wraps db, whose schema (package postgres's or sqlite's
// migrations) is already current. schema is PostgreSQL's schema name and
// ignored for SQLite.
func NewStore(db *sql.DB, dialect Dialect, schema string) *Store {
	q, err := sqldialect.Load(sqlFiles, "sql", dialect, schema)
	if err != nil { // compiled in: cannot fail at run time
		panic("scheduler: loading embedded SQL: " + err.Error())
	}
	// A due job's slot spreads the due jobs over the live daemons
	// (claim_jobs): a hash of its name seeded with its due second, so that
	// which daemon a job's tick falls to changes every tick and no pattern
	// of names or schedules lands on one daemon; in SQLite, which has no
	// hash, its row number plus its due second (an embedded store's jobs
	// are numbered in the order they were first published).
	slot := "hashtextextended(name, floor(extract(epoch from next_tick_at))::bigint)"
	if dialect == SQLite {
		slot = "(rowid + next_tick_at / 1000000)"
	}
	q["claim_jobs"] = strings.ReplaceAll(q["claim_jobs"], "@job_slot@", slot)
	funcMacros(q, dialect)
	s := &Store{db: db, dialect: dialect, schema: schema, q: q, outbox: outbox.NewStore(db, dialect, schema)}
	return s
}

// share is a daemon's part of the due jobs when several daemons are live:
// of them, it is the mine-th (from 0), and claims first the due jobs whose
// slot modulo of is mine; another daemon's due job only once it is late by
// more than late (that daemon is busy, slow or gone). of ≤ 1: every due
// job. Which daemon claims a tick changes nothing else: the claim locks
// the job's row and skips rows other daemons have locked, as before.
type share struct {
	of, mine int
	late     time.Duration
}

// liveDaemons lists the ids of the daemons seen within window, in order.
func (s *Store) liveDaemons(ctx context.Context, window time.Duration) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.query("live_daemons"), ms(window))
	if err != nil {
		return nil, s.translate(err, "listing the live daemons")
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, s.translate(err, "listing the live daemons")
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, s.translate(err, "listing the live daemons")
	}
	return ids, nil
}

func (s *Store) query(name string) string {
	q, ok := s.q[name]
	if !ok {
		panic("scheduler: no embedded SQL named " + name)
	}
	return q
}

// ts converts an instant to the dialect's parameter (zero: NULL).
func (s *Store) ts(t time.Time) any { return sqldialect.Param(s.dialect, t) }

// dbTime scans either dialect's instants (and NULL, as the zero time).
type dbTime = sqldialect.Time

func ms(d time.Duration) int64 { return d.Milliseconds() }

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// inTx runs fn in one transaction (sqldialect.InTx).
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqldialect.InTx(ctx, s.db, s.dialect, fn)
}

// translate turns driver errors into baton errors at this package's edge.
func (s *Store) translate(err error, what string) error {
	return sqldialect.Translate(err, s.dialect, what)
}

// Now is the store's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	return s.now(ctx, s.db)
}

func (s *Store) now(ctx context.Context, q querier) (time.Time, error) {
	var t dbTime
	if err := q.QueryRowContext(ctx, s.query("now")).Scan(&t); err != nil {
		return time.Time{}, s.translate(err, "reading the store's clock")
	}
	return t.Time, nil
}

// Publish writes the definitions of a job file to the store: new jobs and
// jobs whose version differs are written with this host and time, and get a
// next tick; jobs named in removed are marked removed (their history stays).
// It returns the names it wrote. Each definition is written with the
// feature level it needs (Needs); a current definition recorded with a
// lower level gets its level raised. A host-scoped job is written as
// host's instance of it (Instances).
func (s *Store) Publish(ctx context.Context, jobs []baton.Job, host string, removed []string) ([]string, error) {
	return s.publish(ctx, jobs, host, removed, FeatureLevel)
}

// publish is Publish by a daemon of feature level own.
func (s *Store) publish(ctx context.Context, jobs []baton.Job, host string, removed []string, own int) ([]string, error) {
	jobs, err := Instances(jobs, host)
	if err != nil {
		return nil, err
	}
	var changed []string
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		changed = changed[:0]
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			j = j.WithDefaults()
			version := j.Version()
			need := needs(j, own)
			var oldVersion string
			var oldNext dbTime
			var removedAt dbTime
			var oldLevel int
			err := tx.QueryRowContext(ctx, s.query("job_version"), j.Name).
				Scan(&oldVersion, &oldNext, &removedAt, &oldLevel)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return s.translate(err, "reading job "+j.Name)
			case oldVersion == version && removedAt.IsZero() && oldLevel >= need:
				continue
			case oldVersion == version && removedAt.IsZero():
				if _, err := tx.ExecContext(ctx, s.query("raise_level"), j.Name, need); err != nil {
					return s.translate(err, "raising the feature level of job "+j.Name)
				}
				changed = append(changed, j.Name)
				continue
			}
			c, err := Compile(j)
			if err != nil {
				return err
			}
			// A changed job keeps its due ticks due (so catch-up applies
			// across the change); otherwise it starts from now.
			after := now
			if !oldNext.IsZero() && oldNext.Before(now) && removedAt.IsZero() {
				after = oldNext.Add(-time.Microsecond)
			}
			def, err := json.Marshal(j)
			if err != nil {
				return baton.Wrap(baton.EINTERNAL, err, "encoding job %s", j.Name)
			}
			if _, err := tx.ExecContext(ctx, s.query("insert_job"), j.Name, version, string(def),
				s.ts(c.Next(after)), j.Paused, host, need, j.Host); err != nil {
				return s.translate(err, "writing job "+j.Name)
			}
			changed = append(changed, j.Name)
		}
		for _, name := range removed {
			if _, err := tx.ExecContext(ctx, s.query("remove_job"), name); err != nil {
				return s.translate(err, "removing job "+name)
			}
		}
		return nil
	})
	return changed, err
}

// Job returns one job as the store holds it; ENOTFOUND if it has none.
func (s *Store) Job(ctx context.Context, name string) (*baton.DefinedJob, error) {
	return s.getJob(ctx, s.db, name)
}

func (s *Store) getJob(ctx context.Context, q querier, name string) (*baton.DefinedJob, error) {
	var dj baton.DefinedJob
	var def string
	var next, at dbTime
	err := q.QueryRowContext(ctx, s.query("get_job"), name).
		Scan(new(string), &dj.Version, &def, &next, &dj.Paused, &dj.PausedNote, &dj.DefinedBy, &at, &dj.FeatureLevel)
	if errors.Is(err, sql.ErrNoRows) {
		msg := fmt.Sprintf("no job named %q in the store (is a daemon running with a job file that defines it?", name)
		if !strings.Contains(name, "@") {
			msg += " A job with scope: host or @reboot is stored once a host, as NAME@HOST: see baton jobs"
		}
		return nil, &baton.Error{Code: baton.ENOTFOUND, Field: "job", Message: msg + ")"}
	}
	if err != nil {
		return nil, s.translate(err, "reading job "+name)
	}
	if err := json.Unmarshal([]byte(def), &dj.Job); err != nil {
		return nil, baton.Wrap(baton.EINTERNAL, err, "decoding the stored definition of %s", name)
	}
	dj.NextTick, dj.DefinedAt = next.Time, at.Time
	return &dj, nil
}

// Jobs lists every job the store holds, with its last outcome.
func (s *Store) Jobs(ctx context.Context) ([]baton.DefinedJob, error) {
	var defs [][]byte
	var name, version string
	var def []byte
	out, err := s.listJobs(ctx, "list_jobs", []any{&name, &version, &def}, func(dj *baton.DefinedJob) error {
		dj.Job.Name, dj.Version = name, version
		defs = append(defs, def) // rows.Scan gives each row's bytes a slice of their own
		return nil
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	// The definitions are decoded after the rows, on every core.
	var mu sync.Mutex
	var decodeErr error
	par.For(len(out), 256, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if err := json.Unmarshal(defs[i], &out[i].Job); err != nil {
				mu.Lock()
				if decodeErr == nil {
					decodeErr = baton.Wrap(baton.EINTERNAL, err, "decoding the stored definition of job %s", out[i].Job.Name)
				}
				mu.Unlock()
				return
			}
		}
	})
	if decodeErr != nil {
		return nil, decodeErr
	}
	return out, nil
}

// LastTicks fills dj's last ended tick, its outcome and its last success
// (as Jobs lists them) from the store: for a reader of one job, which Job
// does not fill.
func (s *Store) LastTicks(ctx context.Context, dj *baton.DefinedJob) error {
	var last sql.NullString
	var tick, success dbTime
	err := s.db.QueryRowContext(ctx, s.query("last_ticks"), dj.Job.Name).Scan(&last, &tick, &success)
	if errors.Is(err, sql.ErrNoRows) {
		dj.LastOutcome, dj.LastTick, dj.LastSuccess = "", time.Time{}, time.Time{}
		return nil
	}
	if err != nil {
		return s.translate(err, "reading the last ticks of job "+dj.Job.Name)
	}
	dj.LastOutcome, dj.LastTick, dj.LastSuccess = baton.Outcome(last.String), tick.Time, success.Time
	return nil
}

// JobSchedules lists every job as Jobs does, but each Job holds only what
// judges its schedule: Name, Schedule, Timezone, DST and Jitter (enough
// for Compile, and to tell when a job is overdue), and Host (which
// daemons run it). It is for the readers
// of every job (status, the dashboard's overview, /metrics), which Jobs'
// whole definitions made slow at 10,000 jobs.
func (s *Store) JobSchedules(ctx context.Context) ([]baton.DefinedJob, error) {
	first, fill := scheduleColumns()
	return s.listJobs(ctx, "list_job_schedules", first, fill)
}

// EachJobSchedule reads what JobSchedules does, and gives each job to
// yield as it is read instead of listing them: the record is overwritten
// by the next job, so yield copies what it keeps. A reader that keeps
// little of each job (a /metrics scrape) holds no listing of 10,000
// definitions at its height. An error of yield ends the read.
func (s *Store) EachJobSchedule(ctx context.Context, yield func(dj *baton.DefinedJob) error) error {
	first, fill := scheduleColumns()
	_, err := s.eachJob(ctx, "list_job_schedules", first, fill, yield)
	return err
}

// scheduleColumns are list_job_schedules' first columns, and how a job
// takes them.
func scheduleColumns() ([]any, func(dj *baton.DefinedJob) error) {
	var name, version, schedule, host string
	var tz, gap, repeat, jitter sql.NullString
	return []any{&name, &version, &schedule, &tz, &gap, &repeat, &jitter, &host}, func(dj *baton.DefinedJob) error {
		dj.Job.Name, dj.Version, dj.Job.Schedule, dj.Job.Host = name, version, schedule, host
		dj.Job.Timezone, dj.Job.DST.Gap, dj.Job.DST.Repeat = tz.String, gap.String, repeat.String
		if jitter.Valid {
			d, err := time.ParseDuration(jitter.String)
			if err != nil {
				return baton.Wrap(baton.EINTERNAL, err, "decoding the stored jitter of job %s", dj.Job.Name)
			}
			dj.Job.Jitter = baton.Duration(d)
		}
		return nil
	}
}

// listJobs runs query, a listing of jobs whose first columns are scanned
// into first and then taken into each job by fill, and whose last nine are
// list_jobs' (eachJob). The destinations are made once for all rows: made
// for each row, they were a third of what a listing allocated. The jobs are
// gathered in chunks and copied once into a slice of their number:
// appending 10,000 of them one by one copied them again at each growth, a
// third of the listing's CPU. The first chunk is as long as the last
// listing, with room for a few more: when the jobs fit in it, it is the
// listing, and no job is copied (the dashboard lists them each second, and
// two copies of 10,000 were its read's height).
func (s *Store) listJobs(ctx context.Context, query string, first []any, fill func(dj *baton.DefinedJob) error) ([]baton.DefinedJob, error) {
	var chunks [][]baton.DefinedJob
	n, err := s.eachJob(ctx, query, first, fill, func(dj *baton.DefinedJob) error {
		if len(chunks) == 0 || len(chunks[len(chunks)-1]) == cap(chunks[len(chunks)-1]) {
			size := min(1024, 64<<len(chunks))
			if len(chunks) == 0 {
				if last := int(s.listed.Load()); last > 0 {
					size = last + last/16 + 16
				}
			}
			chunks = append(chunks, make([]baton.DefinedJob, 0, size))
		}
		c := &chunks[len(chunks)-1]
		*c = append(*c, *dj)
		return nil
	})
	if err != nil || n == 0 {
		return nil, err
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	out := make([]baton.DefinedJob, 0, n)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out, nil
}

// eachJob runs query as listJobs does, and gives each job to yield as it
// is read, in one record that the next row overwrites. It returns how many
// jobs it read.
func (s *Store) eachJob(ctx context.Context, query string, first []any, fill, yield func(dj *baton.DefinedJob) error) (int, error) {
	rows, err := s.db.QueryContext(ctx, s.query(query))
	if err != nil {
		return 0, s.translate(err, "listing jobs")
	}
	defer rows.Close()
	var (
		next, at, lastTick, lastSuccess dbTime
		last                            sql.NullString
		paused                          bool
		pausedNote, definedBy           string
		level                           int
	)
	dest := append(first, &next, &paused, &pausedNote, &definedBy, &at, &last, &lastTick, &lastSuccess, &level)
	var dj baton.DefinedJob
	n := 0
	for rows.Next() {
		n++
		if err := rows.Scan(dest...); err != nil {
			return n, s.translate(err, "listing jobs")
		}
		dj = baton.DefinedJob{}
		if err := fill(&dj); err != nil {
			return n, err
		}
		dj.Paused, dj.PausedNote, dj.DefinedBy, dj.FeatureLevel = paused, pausedNote, definedBy, level
		dj.NextTick, dj.DefinedAt = next.Time, at.Time
		dj.LastOutcome, dj.LastTick, dj.LastSuccess = baton.Outcome(last.String), lastTick.Time, lastSuccess.Time
		if err := yield(&dj); err != nil {
			return n, err
		}
	}
	if err := rows.Err(); err != nil {
		return n, s.translate(err, "listing jobs")
	}
	s.listed.Store(int64(n))
	return n, nil
}

// Version is a job's current version in the store.
type Version struct {
	Version   string
	DefinedBy string
	DefinedAt time.Time
	// FeatureLevel is the level a daemon needs to run the job (Needs).
	FeatureLevel int
	// Host is the host of a host-scoped job's instance; "" for a fleet job.
	Host string
	// Func is the service of a Go function (Job.Func); "" for a command.
	Func string
}

// Versions returns every job's version, by name.
func (s *Store) Versions(ctx context.Context) (map[string]Version, error) {
	rows, err := s.db.QueryContext(ctx, s.query("list_versions"))
	if err != nil {
		return nil, s.translate(err, "listing job versions")
	}
	defer rows.Close()
	out := map[string]Version{}
	for rows.Next() {
		var name string
		var v Version
		var at dbTime
		if err := rows.Scan(&name, &v.Version, &v.DefinedBy, &at, &v.FeatureLevel, &v.Host, &v.Func); err != nil {
			return nil, s.translate(err, "listing job versions")
		}
		v.DefinedAt = at.Time
		out[name] = v
	}
	return out, s.translate(rows.Err(), "listing job versions")
}

// JobPage returns up to limit job definitions named after after, in order
// of name (removed jobs too: their history is pruned as well).
func (s *Store) JobPage(ctx context.Context, after string, limit int) ([]baton.Job, error) {
	rows, err := s.db.QueryContext(ctx, s.query("page_jobs"), after, limit)
	if err != nil {
		return nil, s.translate(err, "listing jobs")
	}
	defer rows.Close()
	var out []baton.Job
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			return nil, s.translate(err, "listing jobs")
		}
		var j baton.Job
		if err := json.Unmarshal([]byte(def), &j); err != nil {
			return nil, baton.Wrap(baton.EINTERNAL, err, "decoding the stored definition of %s", name)
		}
		out = append(out, j)
	}
	return out, s.translate(rows.Err(), "listing jobs")
}

// Claim is a tick a daemon has claimed and must drive to its outcome.
type Claim struct {
	baton.Tick
	State    string // as claimed: pending, queued or running (taken over)
	Attempts int    // attempts already made
	RunID    string // the current attempt's run id ("" before the first)
	Job      baton.Job
	// CatchUp marks a late tick that runs before a later one of the same
	// claim (catchup all): it waits for the lease rather than skip.
	CatchUp bool
}

// maxTicksPerClaim bounds the ticks one job adds in one claim, so that a
// job missed for a long time catches up in several short transactions.
const maxTicksPerClaim = 1000

// ClaimDue claims up to limit due jobs for daemon: in one transaction it
// locks them (skipping jobs other daemons are claiming), records their due
// ticks (runnable ones pending and claimed, missed ones skipped-missed, per
// the job's catch-up policy), and advances each job's next tick. It returns
// the runnable ticks, each job's in order.
//
// It claims the jobs of FeatureLevel or below; a Daemon claims those of
// its own level.
func (s *Store) ClaimDue(ctx context.Context, daemon string, claimTTL time.Duration, limit int) ([]Claim, error) {
	out, _, _, err := s.claimDue(ctx, daemon, "", FeatureLevel, commandsOnly, claimTTL, limit, share{})
	return out, err
}

// skipKey counts skipped ticks by job and reason, for the daemon's Observer.
type skipKey struct {
	job    string
	reason SkipReason
}

// claimDue is ClaimDue by a daemon of feature level own on host (which
// also claims that host's instances of host-scoped jobs) that also counts
// the ticks it recorded skipped-missed (for the daemon's Observer), and
// says how many due jobs it took (taken), whether their ticks run or not.
func (s *Store) claimDue(ctx context.Context, daemon, host string, own int, runs runnable, claimTTL time.Duration, limit int, sh share) (out []Claim, missed map[skipKey]int, taken int, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		out, missed, taken = out[:0], map[skipKey]int{}, 0
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, s.query("claim_jobs"), s.ts(now), limit, own, sh.of, sh.mine, s.ts(now.Add(-sh.late)), host, runs.commands, runs.service)
		if err != nil {
			return s.translate(err, "claiming due jobs")
		}
		type due struct {
			job   baton.Job
			ver   string
			next  time.Time
			level int
		}
		var jobs []due
		for rows.Next() {
			var d due
			var def string
			var next dbTime
			if err := rows.Scan(new(string), &d.ver, &def, &next, &d.level); err != nil {
				rows.Close()
				return s.translate(err, "claiming due jobs")
			}
			if err := json.Unmarshal([]byte(def), &d.job); err != nil {
				rows.Close()
				return baton.Wrap(baton.EINTERNAL, err, "decoding a stored definition")
			}
			d.next = next.Time
			jobs = append(jobs, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.translate(err, "claiming due jobs")
		}
		// A service's replica leaves the functions it did not register
		// (another deployment of the service has them): it neither plans
		// nor advances them, and does not count them as taken, so that a
		// round of them alone is not taken for a full batch.
		jobs = slices.DeleteFunc(jobs, func(d due) bool { return !runs.runs(d.job) })
		taken = len(jobs)
		var up Uptime
		if len(jobs) > 0 {
			oldest := jobs[0].next // claim_jobs orders them by next tick
			if up, err = s.uptime(ctx, tx, daemon, own, oldest, now); err != nil {
				return err
			}
		}
		var ticks []plannedTick
		var names []string
		var nexts []time.Time
		for _, d := range jobs {
			c, err := Compile(d.job)
			if err != nil { // stored definitions were valid when written
				return baton.Wrap(baton.EINTERNAL, err, "stored job %s", d.job.Name)
			}
			planned, next := plan(d.job, c, d.next, now, maxTicksPerClaim, up.on(d.job.Host), d.level)
			last := -1
			for i, p := range planned {
				if p.Run {
					last = i
				}
			}
			for i, p := range planned {
				tick := baton.Tick{Job: d.job.Name, At: p.At, Version: d.ver, Kind: baton.TickScheduled}
				ticks = append(ticks, plannedTick{tick: tick, p: p, job: d.job, catchUp: i < last})
			}
			names, nexts = append(names, d.job.Name), append(nexts, next)
		}
		inserted, err := s.insertTicks(ctx, tx, daemon, claimTTL, ticks)
		if err != nil {
			return err
		}
		for i, pt := range ticks {
			switch {
			case inserted[i] && pt.p.Run:
				out = append(out, Claim{Tick: pt.tick, State: baton.TickPending, Job: pt.job, CatchUp: pt.catchUp})
			case inserted[i]:
				missed[skipKey{pt.tick.Job, pt.p.Skip}]++
			}
		}
		return s.advanceJobs(ctx, tx, names, nexts)
	})
	if err != nil {
		missed, taken = nil, 0 // rolled back
	}
	return out, missed, taken, err
}

// plannedTick is a tick a claim records: claimed to run, or ended
// skipped-missed.
type plannedTick struct {
	tick    baton.Tick
	p       Planned
	job     baton.Job
	catchUp bool
}

// insertTicks records a claim's ticks (insert_tick.sql for each; in
// PostgreSQL one statement for all, postgres/insert_ticks.sql) and says
// which were new: a tick that exists already stays as it is.
func (s *Store) insertTicks(ctx context.Context, tx *sql.Tx, daemon string, claimTTL time.Duration, ticks []plannedTick) ([]bool, error) {
	inserted := make([]bool, len(ticks))
	if len(ticks) == 0 {
		return inserted, nil
	}
	row := func(pt plannedTick) (state string, outcome *string, claimedBy string) {
		if pt.p.Run {
			return baton.TickPending, nil, daemon
		}
		o := string(baton.OutcomeSkippedMissed)
		return baton.TickDone, &o, ""
	}
	if s.dialect != Postgres {
		for i, pt := range ticks {
			state, outcome, claimedBy := row(pt)
			res, err := tx.ExecContext(ctx, s.query("insert_tick"), pt.tick.Job, s.ts(pt.tick.At), pt.tick.Version,
				pt.tick.Kind, state, outcome, pt.p.Reason, claimedBy, ms(claimTTL))
			if err != nil {
				return nil, s.translate(err, "recording a tick of "+pt.tick.Job)
			}
			n, _ := res.RowsAffected()
			inserted[i] = n == 1
		}
		return inserted, nil
	}
	n := len(ticks)
	jobs, versions, kinds, states, reasons, claimedBy := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats, outcomes := make([]time.Time, n), make([]*string, n)
	at := make(map[string]int, n)
	for i, pt := range ticks {
		jobs[i], ats[i], versions[i], kinds[i], reasons[i] = pt.tick.Job, pt.tick.At.UTC().Truncate(time.Microsecond), pt.tick.Version, pt.tick.Kind, pt.p.Reason
		states[i], outcomes[i], claimedBy[i] = row(pt)
		at[pt.tick.IdempotencyKey()] = i
	}
	rows, err := tx.QueryContext(ctx, s.query("postgres/insert_ticks"), jobs, ats, versions, kinds, states, outcomes, reasons, claimedBy, ms(claimTTL))
	if err != nil {
		return nil, s.translate(err, "recording a claim's ticks")
	}
	defer rows.Close()
	for rows.Next() {
		var t baton.Tick
		var when dbTime
		if err := rows.Scan(&t.Job, &when); err != nil {
			return nil, s.translate(err, "recording a claim's ticks")
		}
		t.At = when.Time
		if i, ok := at[t.IdempotencyKey()]; ok {
			inserted[i] = true
		}
	}
	return inserted, s.translate(rows.Err(), "recording a claim's ticks")
}

// advanceJobs sets the claimed jobs' next ticks (advance_job.sql for each;
// in PostgreSQL one statement, postgres/advance_jobs.sql).
func (s *Store) advanceJobs(ctx context.Context, tx *sql.Tx, names []string, nexts []time.Time) error {
	if s.dialect == Postgres && len(names) > 1 {
		utc := make([]time.Time, len(nexts))
		for i, t := range nexts {
			utc[i] = t.UTC().Truncate(time.Microsecond)
		}
		_, err := tx.ExecContext(ctx, s.query("postgres/advance_jobs"), names, utc)
		return s.translate(err, "advancing the claimed jobs")
	}
	for i, name := range names {
		if _, err := tx.ExecContext(ctx, s.query("advance_job"), name, s.ts(nexts[i])); err != nil {
			return s.translate(err, "advancing "+name)
		}
	}
	return nil
}

// uptime is when daemons ran since after (see Uptime): the claiming daemon
// runs until now, whenever it was last seen, at level own.
func (s *Store) uptime(ctx context.Context, tx *sql.Tx, daemon string, own int, after, now time.Time) (Uptime, error) {
	rows, err := tx.QueryContext(ctx, s.query("uptime"), s.ts(after), daemon)
	if err != nil {
		return nil, s.translate(err, "reading when daemons ran")
	}
	defer rows.Close()
	var up Uptime
	for rows.Next() {
		var id string
		var from, to dbTime
		var level int
		var host string
		if err := rows.Scan(&id, &from, &to, &level, &host); err != nil {
			return nil, s.translate(err, "reading when daemons ran")
		}
		if id == daemon {
			to.Time, level = now, own
		}
		up = append(up, Span{From: from.Time, To: to.Time, Level: level, Host: host})
	}
	return up, s.translate(rows.Err(), "reading when daemons ran")
}

// SetNextTick sets every job's next tick to at: benchmarks use it to make
// all jobs due at once.
func (s *Store) SetNextTick(ctx context.Context, at time.Time) error {
	_, err := s.db.ExecContext(ctx, s.query("set_next_tick"), s.ts(at))
	return s.translate(err, "setting next ticks")
}

// ClaimOpen claims up to limit open ticks that nobody holds: triggered and
// backfilled ticks, retries whose backoff has passed, and ticks whose
// daemon stopped renewing its claims. A scheduled tick that never started
// and that a later tick of its job has overtaken (started first) is not
// returned: it is recorded skipped-missed, since a job's scheduled ticks
// start in tick order.
//
// It claims the ticks of jobs of FeatureLevel or below; a Daemon claims
// those of its own level.
func (s *Store) ClaimOpen(ctx context.Context, daemon string, claimTTL time.Duration, limit int) ([]Claim, error) {
	out, _, err := s.claimOpen(ctx, daemon, "", FeatureLevel, commandsOnly, claimTTL, limit)
	return out, err
}

// claimOpen is ClaimOpen by a daemon of feature level own on host (which
// also claims the ticks of that host's instances of host-scoped jobs) that
// also counts, by job, the overtaken ticks it recorded (for the daemon's
// Observer).
func (s *Store) claimOpen(ctx context.Context, daemon, host string, own int, runs runnable, claimTTL time.Duration, limit int) ([]Claim, map[string]int, error) {
	var out []Claim
	var overtaken map[string]int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out, overtaken = out[:0], map[string]int{}
		rows, err := tx.QueryContext(ctx, s.query("claim_ticks"), daemon, ms(claimTTL), limit, own, host, runs.commands, runs.service)
		if err != nil {
			return s.translate(err, "claiming open ticks")
		}
		var claimed []Claim
		for rows.Next() {
			var c Claim
			var at dbTime
			if err := rows.Scan(&c.Tick.Job, &at, &c.Version, &c.Kind, &c.State, &c.Attempts, &c.RunID, new(string)); err != nil {
				rows.Close()
				return s.translate(err, "claiming open ticks")
			}
			c.At = at.Time
			claimed = append(claimed, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.translate(err, "claiming open ticks")
		}
		for _, c := range claimed {
			// A running tick's tree may still live: the daemon that takes it
			// over waits for the lease before it ends it.
			if c.Kind == baton.TickScheduled && c.State != baton.TickRunning {
				later, err := s.laterStart(ctx, tx, c.Tick)
				if err != nil {
					return err
				}
				if !later.IsZero() {
					o, ok, err := s.endOvertaken(ctx, tx, c.Tick, c.RunID, c.Attempts, later, true)
					if err != nil {
						return err
					}
					if ok && o == baton.OutcomeSkippedMissed {
						overtaken[c.Tick.Job]++
					}
					continue
				}
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// Definitions are read after the claim commits: a claimed tick is this
	// daemon's until its claim lapses, and a job that is gone is dealt with
	// by the caller. A definition rewritten since the claim with a level
	// above this daemon's, or into one it cannot run, gets its tick back.
	kept := out[:0]
	for _, c := range out {
		dj, err := s.Job(ctx, c.Tick.Job)
		switch {
		case baton.ErrorCode(err) == baton.ENOTFOUND:
			c.Job = baton.Job{}
		case err != nil:
			return append(kept, c), overtaken, err
		case dj.FeatureLevel > own || !runs.runs(dj.Job):
			if err := s.ReleaseClaim(ctx, c.Tick, daemon); err != nil {
				return kept, overtaken, err
			}
			continue
		default:
			c.Job = dj.Job
		}
		kept = append(kept, c)
	}
	return kept, overtaken, nil
}

// LaterStart is the first tick of t's job and kind after t that has
// started an attempt; zero if none has.
func (s *Store) LaterStart(ctx context.Context, t baton.Tick) (time.Time, error) {
	return s.laterStart(ctx, s.db, t)
}

// laterStart is LaterStart in q (a transaction or the pool).
func (s *Store) laterStart(ctx context.Context, q querier, t baton.Tick) (time.Time, error) {
	var at dbTime
	err := q.QueryRowContext(ctx, s.query("later_start"), t.Job, s.ts(t.At), t.Kind).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, s.translate(err, "reading the later ticks of "+t.Job)
	}
	return at.Time, nil
}

// Overtaken is why StartAttemptInOrder refuses a tick: a later scheduled
// tick of its job, Later, has started.
type Overtaken struct{ Later time.Time }

func (e *Overtaken) Error() string {
	return "a later tick (" + baton.FormatTick(e.Later) + ") has started"
}

// EndOvertaken ends a scheduled tick that StartAttemptInOrder refused
// because the tick at later started first, if runID is still its current
// attempt: with its last attempt's outcome (which is then not retried), or
// skipped-missed when it had none; its reason says why. It returns the
// outcome, and false when another daemon ended the tick or took it over.
func (s *Store) EndOvertaken(ctx context.Context, t baton.Tick, runID string, attempts int, later time.Time) (baton.Outcome, bool, error) {
	return s.endOvertaken(ctx, s.db, t, runID, attempts, later, false)
}

// endOvertaken is EndOvertaken; reclaimed says the tick's claim was taken
// over from a daemon that let it go.
func (s *Store) endOvertaken(ctx context.Context, q querier, t baton.Tick, runID string, attempts int, later time.Time, reclaimed bool) (baton.Outcome, bool, error) {
	var why string
	switch {
	case attempts > 0:
		why = "not retried: a later tick (" + baton.FormatTick(later) + ") has started, and a job's scheduled ticks start in tick order"
	case reclaimed:
		why = "not run: a later tick (" + baton.FormatTick(later) + ") started first, and a job's scheduled ticks start in tick order; " +
			"the daemon that claimed it let the claim go (it stopped, died, froze or was cut off) before running it"
	default:
		why = "not run: a later tick (" + baton.FormatTick(later) + ") started first, and a job's scheduled ticks start in tick order"
	}
	var o string
	err := q.QueryRowContext(ctx, s.query("end_overtaken"), t.Job, s.ts(t.At), runID, why).Scan(&o)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.translate(err, "recording the outcome of "+t.IdempotencyKey())
	}
	return baton.Outcome(o), true, nil
}

// RenewClaims extends every open tick daemon has claimed.
func (s *Store) RenewClaims(ctx context.Context, daemon string, claimTTL time.Duration) error {
	_, err := s.db.ExecContext(ctx, s.query("renew_claims"), daemon, ms(claimTTL))
	return s.translate(err, "renewing claims")
}

// RenewHeld extends the claims of the open ticks daemon is working on, and
// of no other: a tick claimed in its name that it no longer works on (its
// handling gave up) lapses after claimTTL, and another daemon takes it
// over, rather than staying open for as long as the daemon lives.
func (s *Store) RenewHeld(ctx context.Context, daemon string, claimTTL time.Duration, ticks []baton.Tick) error {
	if len(ticks) == 0 {
		return nil
	}
	if s.dialect == Postgres {
		jobs, ats := make([]string, len(ticks)), make([]time.Time, len(ticks))
		for i, t := range ticks {
			jobs[i], ats[i] = t.Job, t.At.UTC().Truncate(time.Microsecond)
		}
		_, err := s.db.ExecContext(ctx, s.query("postgres/renew_held"), daemon, ms(claimTTL), jobs, ats)
		return s.translate(err, "renewing claims")
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for _, t := range ticks {
			if _, err := tx.ExecContext(ctx, s.query("renew_tick"), daemon, ms(claimTTL), t.Job, s.ts(t.At)); err != nil {
				return s.translate(err, "renewing claims")
			}
		}
		return nil
	})
}

// ReleaseClaim gives an open tick back for any daemon to take at once.
func (s *Store) ReleaseClaim(ctx context.Context, t baton.Tick, daemon string) error {
	_, err := s.db.ExecContext(ctx, s.query("release_claim"), t.Job, s.ts(t.At), daemon)
	return s.translate(err, "releasing the claim on "+t.IdempotencyKey())
}

// StartAttempt records that an attempt of the tick starts under term, if
// the tick's current attempt is still prevRunID (compare-and-set: of two
// daemons that both hold the tick, one starts). It returns the attempt's
// number, and false when another attempt or an outcome came first.
func (s *Store) StartAttempt(ctx context.Context, t baton.Tick, prevRunID, daemon, host string, term *baton.Term) (int, bool, error) {
	return s.startAttempt(ctx, t, prevRunID, daemon, host, term, false)
}

// StartAttemptInOrder is StartAttempt that keeps a job's scheduled ticks
// starting in tick order: it refuses, with an *Overtaken error, an attempt
// (first, retry or after a takeover) of a scheduled tick when a later
// scheduled tick of the job has started (the job's row lock orders two
// daemons starting ticks of one job at once). Manual and backfilled ticks
// are outside the schedule's order: it starts them as StartAttempt does.
func (s *Store) StartAttemptInOrder(ctx context.Context, t baton.Tick, prevRunID, daemon, host string, term *baton.Term) (int, bool, error) {
	return s.startAttempt(ctx, t, prevRunID, daemon, host, term, t.Kind == baton.TickScheduled)
}

func (s *Store) startAttempt(ctx context.Context, t baton.Tick, prevRunID, daemon, host string, term *baton.Term, inOrder bool) (int, bool, error) {
	var attempt int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		attempt, err = s.start(ctx, tx, t, prevRunID, daemon, host, term, inOrder)
		return err
	})
	return attempt, attempt > 0, err
}

// start is startAttempt in tx: the attempt's number, 0 when another
// attempt or an outcome came first.
func (s *Store) start(ctx context.Context, tx *sql.Tx, t baton.Tick, prevRunID, daemon, host string, term *baton.Term, inOrder bool) (int, error) {
	if inOrder {
		if err := tx.QueryRowContext(ctx, s.query("lock_job"), t.Job).Scan(new(string)); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, s.translate(err, "locking job "+t.Job)
		}
		later, err := s.laterStart(ctx, tx, t)
		if err != nil {
			return 0, err
		}
		if !later.IsZero() {
			return 0, &Overtaken{Later: later}
		}
	}
	var attempt int
	err := tx.QueryRowContext(ctx, s.query("start_attempt"), t.Job, s.ts(t.At), prevRunID,
		term.Owner, host, term.Token).Scan(&attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.translate(err, "starting "+t.IdempotencyKey())
	}
	_, err = tx.ExecContext(ctx, s.query("insert_attempt"), t.Job, s.ts(t.At), attempt, daemon, host, term.Token, term.Owner)
	return attempt, s.translate(err, "recording an attempt of "+t.IdempotencyKey())
}

// Ending is how an attempt (or a tick without one) ended.
type Ending struct {
	Outcome  baton.Outcome
	Reason   string
	ExitCode *int
	Output   string
	// RetryAfter, when positive, leaves the tick pending for another
	// attempt after this long instead of ending it with Outcome.
	RetryAfter time.Duration
	// Notice, when set, is the tick's notification if its job's rule
	// makes one of the outcome: enqueued in the outcome's transaction.
	Notice *Notice
}

// Finish records the end of the tick's attempt runID and, unless a retry
// follows, the tick's one outcome. It returns false when runID is no
// longer the tick's current attempt (another daemon took the tick over):
// the attempt is recorded, the tick is not touched.
func (s *Store) Finish(ctx context.Context, t baton.Tick, runID string, e Ending) (bool, error) {
	var ok bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		ok, err = s.finish(ctx, tx, t, runID, e)
		return err
	})
	return ok, err
}

// finish is Finish in tx.
func (s *Store) finish(ctx context.Context, tx *sql.Tx, t baton.Tick, runID string, e Ending) (bool, error) {
	if runID != "" {
		if _, err := tx.ExecContext(ctx, s.query("finish_attempt"), t.Job, s.ts(t.At), runID,
			e.ExitCode, string(e.Outcome), e.Reason); err != nil {
			return false, s.translate(err, "recording the end of "+t.IdempotencyKey())
		}
	}
	state, outcome := baton.TickDone, any(string(e.Outcome))
	if e.RetryAfter > 0 {
		state, outcome = baton.TickPending, nil
	}
	res, err := tx.ExecContext(ctx, s.query("finish_tick"), t.Job, s.ts(t.At), runID,
		state, outcome, e.Reason, e.ExitCode, e.Output, ms(e.RetryAfter))
	if err != nil {
		return false, s.translate(err, "recording the outcome of "+t.IdempotencyKey())
	}
	n, _ := res.RowsAffected()
	if n != 1 {
		return false, nil
	}
	return true, s.notify(ctx, tx, t, e)
}

// Queue marks a pending tick as the job's one queued tick (queue-one). It
// returns false when another tick of the job is queued already.
func (s *Store) Queue(ctx context.Context, t baton.Tick, runID string) (bool, error) {
	var ok bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// The job's row lock serialises queuers across daemons.
		if err := tx.QueryRowContext(ctx, s.query("lock_job"), t.Job).Scan(new(string)); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return s.translate(err, "locking job "+t.Job)
		}
		res, err := tx.ExecContext(ctx, s.query("queue_tick"), t.Job, s.ts(t.At), runID)
		if err != nil {
			return s.translate(err, "queueing "+t.IdempotencyKey())
		}
		n, _ := res.RowsAffected()
		ok = n == 1
		return nil
	})
	return ok, err
}

// Trigger records a manual tick of job at the store's current instant, for
// any daemon to claim at once.
func (s *Store) Trigger(ctx context.Context, job string) (baton.Tick, error) {
	var tick baton.Tick
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		dj, err := s.getJob(ctx, tx, job)
		if err != nil {
			return err
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		tick = baton.Tick{Job: job, At: now.Truncate(time.Microsecond), Version: dj.Version, Kind: baton.TickManual}
		res, err := tx.ExecContext(ctx, s.query("insert_tick"), job, s.ts(tick.At), tick.Version, tick.Kind,
			baton.TickPending, nil, "", "", 0)
		if err != nil {
			return s.translate(err, "recording a manual tick of "+job)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return baton.Errorf(baton.ECONFLICT, "a tick of %s at %s exists already; trigger again", job, baton.FormatTick(tick.At))
		}
		return nil
	})
	return tick, err
}

// Backfill records the job's scheduled instants in [from, to] as ticks for
// any daemon to run, one at a time (they wait for the lease whatever the
// overlap policy). Instants that have a tick already are left alone. It
// returns how many ticks it added and how many existed.
func (s *Store) Backfill(ctx context.Context, job string, from, to time.Time, limit int) (added, existing int, err error) {
	dj, err := s.Job(ctx, job)
	if err != nil {
		return 0, 0, err
	}
	c, err := Compile(dj.Job)
	if err != nil {
		return 0, 0, baton.Wrap(baton.EINTERNAL, err, "stored job %s", job)
	}
	var ats []time.Time
	for t := c.Next(from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(to); t = c.Next(t) {
		if len(ats) == limit {
			return 0, 0, baton.Invalid("--to", "%s to %s holds more than %d ticks of %s; backfill a shorter range", baton.FormatTick(from), baton.FormatTick(to), limit, job)
		}
		ats = append(ats, t)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		added, existing = 0, 0
		for _, at := range ats {
			res, err := tx.ExecContext(ctx, s.query("insert_tick"), job, s.ts(at), dj.Version, baton.TickBackfill,
				baton.TickPending, nil, "", "", 0)
			if err != nil {
				return s.translate(err, "recording a backfill tick of "+job)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				added++
			} else {
				existing++
			}
		}
		return nil
	})
	return added, existing, err
}

// Pause stops scheduling job (ticks are not created while it is paused);
// Resume schedules it again from now, so the paused time is not caught up.
func (s *Store) Pause(ctx context.Context, job, note string) error {
	return s.setPaused(ctx, job, true, note)
}

// Resume undoes Pause.
func (s *Store) Resume(ctx context.Context, job string) error {
	return s.setPaused(ctx, job, false, "")
}

func (s *Store) setPaused(ctx context.Context, job string, paused bool, note string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		dj, err := s.getJob(ctx, tx, job)
		if err != nil {
			return err
		}
		var next time.Time
		if paused {
			next = dj.NextTick
		} else {
			now, err := s.now(ctx, tx)
			if err != nil {
				return err
			}
			c, err := Compile(dj.Job)
			if err != nil {
				return baton.Wrap(baton.EINTERNAL, err, "stored job %s", job)
			}
			next = dj.NextTick
			if !dj.Paused || next.IsZero() || next.Before(now) {
				next = c.Next(now)
			}
		}
		_, err = tx.ExecContext(ctx, s.query("pause_job"), job, paused, note, s.ts(next))
		return s.translate(err, "pausing "+job)
	})
}

// Ticks lists recorded ticks, newest first, of one job or ("") of all.
func (s *Store) Ticks(ctx context.Context, job string, limit int) ([]baton.TickRecord, error) {
	rows, err := s.db.QueryContext(ctx, s.query("list_ticks"), job, limit)
	if err != nil {
		return nil, s.translate(err, "listing ticks")
	}
	defer rows.Close()
	var out []baton.TickRecord
	for rows.Next() {
		r, err := scanTick(rows)
		if err != nil {
			return nil, s.translate(err, "listing ticks")
		}
		out = append(out, r)
	}
	return out, s.translate(rows.Err(), "listing ticks")
}

// EndedTick is job's ended tick at at, or (at zero) its newest ended tick,
// with its output tail; ENOTFOUND when there is none.
func (s *Store) EndedTick(ctx context.Context, job string, at time.Time) (baton.TickRecord, error) {
	var row *sql.Row
	var missing error
	if at.IsZero() {
		row = s.db.QueryRowContext(ctx, s.query("last_ended_tick"), job)
		missing = baton.Errorf(baton.ENOTFOUND, "no ended tick of %s", job)
	} else {
		row = s.db.QueryRowContext(ctx, s.query("ended_tick"), job, s.ts(at))
		missing = baton.Errorf(baton.ENOTFOUND, "no ended tick of %s at %s", job, baton.FormatTick(at))
	}
	r, err := scanTick(row)
	if errors.Is(err, sql.ErrNoRows) {
		return r, missing
	}
	return r, s.translate(err, "reading a tick of "+job)
}

// scanTick reads a row of list_ticks' columns.
func scanTick(row interface{ Scan(...any) error }) (baton.TickRecord, error) {
	var r baton.TickRecord
	var at, started, ended dbTime
	var outcome string
	var exit sql.NullInt64
	if err := row.Scan(&r.Tick.Job, &at, &r.Version, &r.Kind, &r.State, &outcome, &r.Reason, &r.Attempts,
		&r.Host, &r.Daemon, &r.Token, &r.RunID, &started, &ended, &exit, &r.Output); err != nil {
		return r, err
	}
	r.At, r.Started, r.Ended, r.Outcome = at.Time, started.Time, ended.Time, baton.Outcome(outcome)
	if exit.Valid {
		code := int(exit.Int64)
		r.ExitCode = &code
	}
	return r, nil
}

// Attempt is one recorded attempt of a tick.
type Attempt struct {
	Attempt  int           `json:"attempt"`
	Daemon   string        `json:"daemon"`
	Host     string        `json:"host"`
	Token    int64         `json:"token"`
	RunID    string        `json:"run_id"`
	Started  time.Time     `json:"started"`
	Ended    time.Time     `json:"ended,omitzero"`
	ExitCode *int          `json:"exit_code,omitempty"`
	Outcome  baton.Outcome `json:"outcome,omitempty"`
	Reason   string        `json:"reason,omitempty"`
}

// Attempts lists a tick's attempts in order.
func (s *Store) Attempts(ctx context.Context, job string, at time.Time) ([]Attempt, error) {
	rows, err := s.db.QueryContext(ctx, s.query("list_attempts"), job, s.ts(at))
	if err != nil {
		return nil, s.translate(err, "listing attempts")
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var started, ended dbTime
		var exit sql.NullInt64
		var outcome string
		if err := rows.Scan(&a.Attempt, &a.Daemon, &a.Host, &a.Token, &a.RunID, &started, &ended, &exit, &outcome, &a.Reason); err != nil {
			return nil, s.translate(err, "listing attempts")
		}
		a.Started, a.Ended, a.Outcome = started.Time, ended.Time, baton.Outcome(outcome)
		if exit.Valid {
			code := int(exit.Int64)
			a.ExitCode = &code
		}
		out = append(out, a)
	}
	return out, s.translate(rows.Err(), "listing attempts")
}

// Prune deletes up to batch of job's ended ticks that are past its history
// settings, and returns how many it deleted.
func (s *Store) Prune(ctx context.Context, j baton.Job, now time.Time, batch int) (int, error) {
	j = j.WithDefaults()
	res, err := s.db.ExecContext(ctx, s.query("prune_ticks"), j.Name, s.ts(now.Add(-j.History.MaxAge.D())),
		j.History.Keep-1, batch)
	if err != nil {
		return 0, s.translate(err, "pruning the history of "+j.Name)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// DaemonInfo is a running daemon as the store knows it.
type DaemonInfo struct {
	ID       string            `json:"id"`
	Host     string            `json:"host"`
	PID      int               `json:"pid"`
	Config   string            `json:"config"`
	Versions map[string]string `json:"versions,omitempty"` // job → version in its file (not read by Fleet)
	Started  time.Time         `json:"started"`
	Seen     time.Time         `json:"seen"`
	// Version is the baton that runs the daemon, as 'baton version' prints
	// it ("" for a daemon older than migration 0010, which does not say).
	Version string `json:"version"`
	// FeatureLevel is the job semantics it implements: it runs the jobs
	// that need this level or less (FeatureLevel, Needs).
	FeatureLevel int `json:"feature_level"`
}

// Register records (or refreshes) a daemon and its file's job versions.
func (s *Store) Register(ctx context.Context, d DaemonInfo) error {
	v, err := json.Marshal(d.Versions)
	if err != nil {
		return baton.Wrap(baton.EINTERNAL, err, "encoding versions")
	}
	_, err = s.db.ExecContext(ctx, s.query("upsert_daemon"), d.ID, d.Host, d.PID, d.Config, string(v), d.Version, d.FeatureLevel)
	return s.translate(err, "registering daemon")
}

// Touch records that a registered daemon is alive; false when it is not
// registered (any more).
func (s *Store) Touch(ctx context.Context, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.query("touch_daemon"), id)
	if err != nil {
		return false, s.translate(err, "touching daemon")
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// Unregister removes a daemon that is stopping.
func (s *Store) Unregister(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, s.query("delete_daemon"), id)
	return s.translate(err, "unregistering daemon")
}

// Daemons lists daemons seen within the last within.
func (s *Store) Daemons(ctx context.Context, within time.Duration) ([]DaemonInfo, error) {
	rows, err := s.db.QueryContext(ctx, s.query("list_daemons"), ms(within))
	if err != nil {
		return nil, s.translate(err, "listing daemons")
	}
	defer rows.Close()
	var out []DaemonInfo
	for rows.Next() {
		var d DaemonInfo
		var v string
		var started, seen dbTime
		if err := rows.Scan(&d.ID, &d.Host, &d.PID, &d.Config, &v, &started, &seen, &d.Version, &d.FeatureLevel); err != nil {
			return nil, s.translate(err, "listing daemons")
		}
		if err := json.Unmarshal([]byte(v), &d.Versions); err != nil {
			return nil, baton.Wrap(baton.EINTERNAL, err, "decoding a daemon's versions")
		}
		d.Started, d.Seen = started.Time, seen.Time
		out = append(out, d)
	}
	return out, s.translate(rows.Err(), "listing daemons")
}

// Drift is a difference between a running daemon's job file and the
// store's definitions: the file has Job at Version, or lacks it (Version "").
type Drift struct {
	Job     string
	Daemon  string // its id
	Version string
}

// Fleet lists the daemons seen within the last within, without their
// files' versions (Versions nil), and where those files differ from the
// store's definitions, compared in the store: a daemon's versions name
// every job, and status and the dashboard need only the differences.
func (s *Store) Fleet(ctx context.Context, within time.Duration) ([]DaemonInfo, []Drift, error) {
	rows, err := s.db.QueryContext(ctx, s.query("list_daemons_brief"), ms(within))
	if err != nil {
		return nil, nil, s.translate(err, "listing daemons")
	}
	var daemons []DaemonInfo
	for rows.Next() {
		var d DaemonInfo
		var started, seen dbTime
		if err := rows.Scan(&d.ID, &d.Host, &d.PID, &d.Config, &started, &seen, &d.Version, &d.FeatureLevel); err != nil {
			rows.Close()
			return nil, nil, s.translate(err, "listing daemons")
		}
		d.Started, d.Seen = started.Time, seen.Time
		daemons = append(daemons, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, s.translate(err, "listing daemons")
	}
	rows, err = s.db.QueryContext(ctx, s.query(string(s.dialect)+"/drift"), ms(within))
	if err != nil {
		return nil, nil, s.translate(err, "comparing the daemons' job files")
	}
	defer rows.Close()
	var drift []Drift
	for rows.Next() {
		var d Drift
		var v sql.NullString
		if err := rows.Scan(&d.Job, &d.Daemon, &v); err != nil {
			return nil, nil, s.translate(err, "comparing the daemons' job files")
		}
		d.Version = v.String
		drift = append(drift, d)
	}
	return daemons, drift, s.translate(rows.Err(), "comparing the daemons' job files")
}

// SchemaVersion is the highest migration applied to the store's schema.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, s.query("schema_version")).Scan(&v)
	return v, s.translate(err, "reading the schema version")
}
