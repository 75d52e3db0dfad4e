package runcmd

import (
	"cmp"
	"context"
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
)

// LocalDir resolves the local store's directory and scope from the flags
// (--scope, --lock-dir; "" when not given), then the environment
// (BATON_SCOPE, BATON_LOCK_DIR), then the scope's default directory.
// explicit says the user named the directory, which may then be created.
func LocalDir(scopeFlag, lockDirFlag string, getenv func(string) string) (dir, scope string, explicit bool, err error) {
	scope = cmp.Or(scopeFlag, getenv("BATON_SCOPE"), flock.ScopeHost)
	if scope != flock.ScopeHost && scope != flock.ScopeUser {
		return "", "", false, baton.Invalid("--scope", "%q: want host or user", scope)
	}
	if dir = cmp.Or(lockDirFlag, getenv("BATON_LOCK_DIR")); dir != "" {
		return dir, scope, true, nil
	}
	dir, err = flock.DefaultDir(scope, getenv)
	return dir, scope, scope == flock.ScopeUser, err
}

// Environ is the environment a job's command starts from: environ (baton's
// own) with BATON_DB set to dsn (the store in use, its password already
// removed unless withPassword; unset for the local store), without
// PGPASSWORD and PGSSLPASSWORD unless withPassword, and never with a secret
// of baton's own configuration (Withheld).
func Environ(environ []string, dsn string, withPassword bool) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "BATON_DB" || Withheld(name) || !withPassword && (name == "PGPASSWORD" || name == "PGSSLPASSWORD") {
			continue
		}
		out = append(out, kv)
	}
	if dsn != "" {
		out = append(out, "BATON_DB="+dsn)
	}
	return out
}

// withheldVariables are the variables of baton's own configuration that
// hold a secret, or may, and whose names do not say so.
var withheldVariables = []string{
	"BATON_RELAY_SINK", // the relay's sink (packaging's baton.env): a URL that may hold credentials
}

// secretWords in a BATON_ variable's name mark it a secret; jobVariables
// are the ones with such a name that a job is meant to have.
var (
	secretWords  = []string{"SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CRED", "TOKEN", "KEY", "DSN", "DATABASE_URL", "PRIVATE"}
	jobVariables = []string{
		"BATON_FENCING_TOKEN", "BATON_IDEMPOTENCY_KEY", "BATON_EVENT_KEY", // baton sets them for a run
		"BATON_FENCE_KEY", // the writers' key, for baton http in the job (docs/HTTP.md)
	}
)

// Withheld says whether the variable name of baton's environment is a
// secret of baton's own configuration, which no job inherits: a BATON_
// variable whose name says so (…SECRET, …PASSWORD, …CREDS, …TOKEN, …KEY,
// …DSN, …DATABASE_URL), unless it is one that baton means for the job,
// and a few named ones (docs/SECURITY.md). A rule by name, so that a new
// setting holding a secret is withheld before anyone lists it. BATON_DB is
// not: Environ passes it without its password.
func Withheld(name string) bool {
	if !strings.HasPrefix(name, "BATON_") || slices.Contains(jobVariables, name) {
		return false
	}
	if slices.Contains(withheldVariables, name) {
		return true
	}
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(name, w) })
}

// localFlags are the store flags of `baton run` as the early path parses
// them: only to learn that the local store is meant and where it is.
type localFlags struct {
	lockDir, scope, schema string
	other                  bool // --db, --db-max-conns or --verbose given
	verbose                bool
	dbWait                 time.Duration
}

// localFlagSet is `baton run`'s flag set as the early path parses it: the
// run's own flags and the names of every store flag cmd/baton gives it
// (TestEarlyRunKnowsEveryFlag compares the two).
func localFlagSet(o *Options, lf *localFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	o.Register(fs)
	other := func(string) error { lf.other = true; return nil }
	fs.Func("db", "", other)
	fs.Func("db-max-conns", "", other)
	fs.BoolVar(&lf.verbose, "verbose", false, "")
	fs.StringVar(&lf.schema, "schema", "", "")
	fs.StringVar(&lf.lockDir, "lock-dir", "", "")
	fs.StringVar(&lf.scope, "scope", "", "")
	DurationVar(fs, &lf.dbWait, "db-wait", 0, "")
	return fs
}

// LocalFlagNames are the flags that the early path of `baton run` parses.
func LocalFlagNames() []string {
	var names []string
	localFlagSet(new(Options), new(localFlags)).VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// notHandled is an error that the early path leaves to cmd/baton's main.
type notHandled struct{ error }

// Local runs `baton run` with args (those after "run") in the local store,
// from an early init (package runinit) before the rest of the binary
// initialises, and returns its exit status. It handles only the common
// case: handled is false, and it has done nothing (said nothing, held no
// lock), when args ask for anything else: a PostgreSQL store (--db, or
// BATON_DB set), --verbose, --db-max-conns, --notify, --help, a flag or argument in
// error, a lock directory that does not exist yet or cannot be opened, or a lease that could not
// be asked for. cmd/baton's main then runs them, as before, and says what
// is wrong. What it handles, it handles with the same Options.Run as main.
func Local(args []string) (status int, handled bool) {
	started := time.Now()
	if _, set := os.LookupEnv("BATON_DB"); set {
		return 0, false
	}
	var o Options
	var lf localFlags
	fs := localFlagSet(&o, &lf)
	// Everything after the first "--" is the command, never flags.
	sep := slices.Index(args, "--")
	var command []string
	if sep >= 0 {
		command = args[sep+1:]
		args = args[:sep]
	}
	pos, err := ParseInterleaved(fs, args)
	if err != nil || lf.other || lf.verbose || o.Notify != "" || o.Validate(pos, sep, command) != nil {
		return 0, false
	}
	dir, scope, explicit, err := LocalDir(lf.scope, lf.lockDir, os.Getenv)
	if err != nil {
		return 0, false
	}
	// A directory to create is left to main too: it gives it the group
	// HostGroup as the system's accounts know it (flock.SetAccounts), which
	// this early init has not set up.
	if _, err := os.Stat(dir); err != nil {
		return 0, false
	}
	l, err := flock.Open(dir, scope, explicit)
	if err != nil {
		return 0, false
	}

	ctx, stop := NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	open := func(context.Context) (*Store, error) {
		return &Store{
			Leaser: l, Close: func() {},
			Environ: Environ(os.Environ(), "", o.Password),
			Retry: func(_ context.Context, _ string, try func() error) error {
				if err := try(); err != nil {
					return notHandled{err}
				}
				return nil
			},
		}, nil
	}
	job := pos[0]
	rep := newReport(job)
	err = o.run(ctx, job, command, Streams{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Started: started}, open, rep)
	if _, ok := err.(notHandled); ok {
		return 0, false
	}
	return Status(os.Stderr, "run", o.finish(rep, os.Stderr, err)), true
}
