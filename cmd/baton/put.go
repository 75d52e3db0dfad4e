package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

const putHelp = `
Usage: baton put [--resource NAME] --dest PATH [flags] < DATA
       baton put [--resource NAME] --dest PATH [flags] --from FILE
       baton put [--resource NAME] --dest PATH [flags] -- COMMAND [ARG...]

Writes its data to PATH atomically (a temporary file in the same directory,
fsync, rename, fsync of the directory), but only if this run's fencing token
is not below the highest token that already wrote RESOURCE. A job whose
lease was taken over while it was paused, and which wakes up to write its
result late, is refused instead of overwriting the newer run's result:

  baton run daily-report -- baton put --dest /srv/report.csv -- make-report

The data: stdin; or --from FILE; or, after --, the output of COMMAND, which
put runs itself and writes only if COMMAND exits 0 (put then exits with
COMMAND's status, writing nothing). Prefer -- COMMAND to a pipe: in
'make-report | baton put', put cannot see make-report fail, and a report cut
short would be written. If you pipe, use 'set -o pipefail' so that the job
at least fails. Empty data is refused (exit 64), since it is what a failed
producer usually leaves: --allow-empty writes an empty file.

The token comes from BATON_FENCING_TOKEN (set by baton run) or --token.

Where the high-water marks live: with a PostgreSQL store (--db or
BATON_DB), in its fence table, shared by every host, so writers on several
hosts of one shared file are fenced against each other; the table's row
lock is held from the check to the rename. There, when BATON_JOB names the
job (baton run sets it), the token is also checked against the job's lease:
a token above the job's current term was never issued and is refused, and
one below it is stale (exit 77). Without a PostgreSQL store, the marks are
files in the local store's lock directory (RESOURCE.fence), so every
writer of a resource must use the same --lock-dir and --scope. 'baton fence
show|reset RESOURCE' reads or, with a confirmation, resets a mark.

The resource: by default, the destination's file name, '@' and 16 hex
digits of the SHA-256 of BATON_JOB (or nothing), a NUL byte, and the
destination's absolute path with its links resolved (--verbose prints it).
Two destinations never share a default resource, and one destination's
writers (under one job) always do. Tokens are per job: give writers of one
file from several jobs the same --resource only if they share one lease.

A symbolic link as PATH is followed: its target is replaced atomically and
the link stays; a link to a missing file is refused. A directory or
another non-regular file as PATH is refused, before any mark is raised;
the mark is raised only for a write that succeeds (before the rename, so a
crash between the two leaves a mark that refuses only stale writers).
Temporary files (.NAME.baton-*) left by killed puts are removed by the next
put to the same destination.

Exit status: 0 written; 77 fenced (stale or never-issued token): nothing
written; 64 usage error (no token, bad resource, empty data, a directory
as PATH); 69 the file or the store could not be written; 70 internal error;
COMMAND's status when it failed.

Examples:
  # write make-report's output only while this run's token is current
  baton run daily-report -- baton put --dest /srv/report.csv -- make-report

  # write a finished file, fenced under a resource name of your own
  baton run report -- baton put --resource report --dest /srv/r.csv --from r.csv
`

// PutCommand is `baton put`.
type PutCommand struct {
	env        *Env
	store      storeFlags
	resource   string
	dest       string
	token      string
	mode       string
	from       string
	allowEmpty bool
	timeout    time.Duration
}

// Run writes its data to the destination through the fence.
func (c *PutCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("put", c.env.Stdout, putHelp)
	c.store.register(fs)
	fs.StringVar(&c.resource, "resource", "", "the fenced resource's `NAME` (default: see above; never shared by two destinations)")
	fs.StringVar(&c.dest, "dest", "", "the file to write (required); a symbolic link is followed")
	fs.StringVar(&c.token, "token", "", "fencing token (default $BATON_FENCING_TOKEN)")
	fs.StringVar(&c.mode, "mode", "0644", "permissions of the written file, octal")
	fs.StringVar(&c.from, "from", "", "read the data from `FILE` instead of stdin")
	fs.BoolVar(&c.allowEmpty, "allow-empty", false, "write empty data (refused by default: a failed producer leaves it)")
	durationFlag(fs, &c.timeout, "timeout", 30*time.Second, "wait at most `DURATION` for other writers of the resource")
	var command []string
	for i, a := range args {
		if a == "--" {
			args, command = args[:i], args[i+1:]
			if len(command) == 0 {
				return baton.Invalid("arguments", "nothing after --: name the command whose output to write")
			}
			break
		}
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton put takes its data from stdin, --from FILE or -- COMMAND, got %q", pos)
	}
	if c.dest == "" {
		return baton.Invalid("--dest", "is required")
	}
	if c.from != "" && command != nil {
		return baton.Invalid("--from", "give --from FILE or -- COMMAND, not both")
	}
	raw, field := c.token, "--token"
	if raw == "" {
		raw, field = c.env.Getenv("BATON_FENCING_TOKEN"), "BATON_FENCING_TOKEN"
	}
	token, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || token < 1 {
		return baton.Invalid(field, "%q is not a fencing token (want an integer >= 1; baton run sets BATON_FENCING_TOKEN)", raw)
	}
	mode, err := strconv.ParseUint(c.mode, 8, 32)
	if err != nil || mode > 0o7777 {
		return baton.Invalid("--mode", "%q is not an octal file mode", c.mode)
	}
	job := c.env.Getenv("BATON_JOB")
	dest, err := resolveDest(c.dest)
	if err != nil {
		return err
	}
	if c.resource == "" {
		c.resource = defaultResource(job, dest)
	}
	if err := baton.ValidateResource(c.resource); err != nil {
		return err
	}
	if c.store.verbose {
		fmt.Fprintf(c.env.Stderr, "baton put: resource %s, destination %s\n", c.resource, dest)
	}
	dsn, _, err := c.store.dsn(c.env)
	if err != nil {
		return err
	}
	var hw *flock.HighWater
	if dsn == "" {
		dir, scope, explicit, err := c.store.local(c.env)
		if err != nil {
			return err
		}
		l, err := flock.Open(dir, scope, explicit)
		if err != nil {
			return err
		}
		hw = l.HighWater()
	}

	// The data goes to disk before the fence is taken, so that the fence is
	// held only for the rename.
	tmp, err := createTemp(dest)
	if err != nil {
		return err
	}
	defer tmp.Close()
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing left to remove
	removeStaleTemps(dest, tmp.Name())
	n, err := c.produce(ctx, tmp, command)
	if err != nil {
		return err
	}
	if n == 0 && !c.allowEmpty {
		return baton.Invalid("data", "is empty, so %s was not written: a producer that failed usually leaves nothing (in a pipe, use set -o pipefail, or baton put -- COMMAND); --allow-empty writes an empty file", dest)
	}
	if err := tmp.Chmod(os.FileMode(mode)); err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "setting the mode of %s", tmp.Name())
	}
	if err := tmp.Sync(); err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "syncing %s", tmp.Name())
	}
	// rename fails only when the file did not change: the fence then puts
	// the previous mark back. A directory that cannot be synced after the
	// rename is reported, but the mark stays: the file holds this write.
	var syncErr error
	rename := func() error {
		if err := os.Rename(tmp.Name(), dest); err != nil {
			return baton.Wrap(baton.EUNAVAILABLE, err, "renaming into %s", dest)
		}
		syncErr = syncDir(filepath.Dir(dest))
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if hw != nil {
		err = hw.Write(ctx, c.resource, token, rename)
	} else {
		err = c.writePostgres(ctx, job, token, rename)
	}
	if baton.ErrorCode(err) == baton.EFENCED {
		fmt.Fprintf(c.env.Stderr, "baton put: %v; %s was not written\n", err, dest)
		return ExitError{baton.ExitFenced}
	}
	if err == nil && syncErr != nil {
		return baton.Wrap(baton.EUNAVAILABLE, syncErr, "%s was written, but may not survive a crash of the host", dest)
	}
	return err
}

// writePostgres fences the write in the PostgreSQL store's high-water
// table. The mark is raised and committed first, in a transaction of its
// own, so that it is durable before the file changes: were the rename to
// land and the commit to be lost, a stale writer could overwrite the file.
// Then a second transaction takes the mark's row lock (postgres.Fence
// again: it refuses if a higher token came in between) and holds it across
// the rename, so that writers on other hosts rename in token order. A
// failed rename puts the previous mark back, in that transaction, if the
// row is still the version the first one wrote (its xmin): then no other
// writer passed the mark since, and nothing was written under it. A crash
// between the two leaves the mark raised, which refuses only tokens below
// one that was issued.
func (c *PutCommand) writePostgres(ctx context.Context, job string, token int64, rename func() error) error {
	st, err := c.store.open(ctx, c.env, "put", true)
	if err != nil {
		return err
	}
	defer st.close()
	db := st.db
	if job != "" {
		if err := checkIssued(ctx, db, job, token); err != nil {
			return err
		}
	}
	table := pgx.Identifier{db.Schema(), "fence"}.Sanitize()
	fence := func(tx pgx.Tx) error { return postgres.Fence(ctx, tx, db.Schema(), c.resource, token) }
	// version is the row's xmin, "" without a row; it locks the row.
	version := func(tx pgx.Tx) (mark int64, xmin string, err error) {
		err = tx.QueryRow(ctx, "select token, xmin::text from "+table+" where resource = $1 for update", c.resource).Scan(&mark, &xmin)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, "", nil
		}
		return mark, xmin, err
	}
	var prev int64
	var raised string // the row version of our raise; "" when the mark was already token
	err = pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		var err error
		if prev, _, err = version(tx); err != nil {
			return err
		}
		if err := fence(tx); err != nil {
			return err
		}
		if prev < token {
			_, raised, err = version(tx)
		}
		return err
	})
	if err != nil {
		return fenceErr(err, c.resource)
	}
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "fencing %s", c.resource)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	_, current, err := version(tx)
	if err != nil {
		return fenceErr(err, c.resource)
	}
	if err := fence(tx); err != nil {
		return fenceErr(err, c.resource)
	}
	if err := rename(); err != nil {
		if raised != "" && current == raised {
			q := "update " + table + " set token = $2, updated_at = clock_timestamp() where resource = $1"
			if prev == 0 {
				q = "delete from " + table + " where resource = $1 and $2::bigint = 0"
			}
			if _, rerr := tx.Exec(ctx, q, c.resource, prev); rerr != nil {
				return fmt.Errorf("%w; and the fence of %s stays at %d: %v", err, c.resource, token, rerr)
			}
			if rerr := tx.Commit(ctx); rerr != nil {
				return fmt.Errorf("%w; and the fence of %s may stay at %d: %v", err, c.resource, token, rerr)
			}
		}
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		// The file is written and the mark committed before it; only the
		// lock's transaction failed to end cleanly.
		fmt.Fprintf(c.env.Stderr, "baton put: the fence's lock transaction did not commit (%v); the write is done\n", err)
	}
	return nil
}

// checkIssued refuses a token that the job's lease never handed out (above
// its current term) and one that a newer term superseded. The lease row is
// read without a lock, so the job's renewals never wait for a put; the
// mark then orders the writes.
func checkIssued(ctx context.Context, db *postgres.DB, job string, token int64) error {
	var current int64
	q := fmt.Sprintf("select fencing_token from %s.job_leases where job_key = $1", pgx.Identifier{db.Schema()}.Sanitize())
	err := db.Pool().QueryRow(ctx, q, job).Scan(&current)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return baton.Errorf(baton.EFENCED, "fencing token %d of job %s was never issued: the job has no lease in this store (BATON_JOB names the job; unset it to fence by the mark alone)", token, job)
	case err != nil:
		return baton.Wrap(baton.EUNAVAILABLE, err, "reading the lease of job %s", job)
	case token > current:
		return baton.Errorf(baton.EFENCED, "fencing token %d of job %s was never issued: the job's current term is %d", token, job, current)
	case token < current:
		return baton.Errorf(baton.EFENCED, "write for job %s with fencing token %d refused: term %d has been granted since", job, token, current)
	}
	return nil
}

func fenceErr(err error, resource string) error {
	if c := baton.ErrorCode(err); c == baton.EFENCED || c == baton.EINVALID {
		return err
	}
	var be *baton.Error
	if errors.As(err, &be) {
		return err
	}
	return baton.Wrap(baton.EUNAVAILABLE, err, "fencing %s", resource)
}

// resolveDest returns the file that put replaces: dest made absolute, its
// links followed. A link to nothing, a directory or another file that is
// not regular is refused, before anything is written or raised.
func resolveDest(dest string) (string, error) {
	abs, err := filepath.Abs(dest)
	if err != nil {
		return "", baton.Invalid("--dest", "%v", err)
	}
	fi, err := os.Lstat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
		if err != nil {
			return "", baton.Wrap(baton.EUNAVAILABLE, err, "the directory of %s", dest)
		}
		return filepath.Join(dir, filepath.Base(abs)), nil
	case err != nil:
		return "", baton.Wrap(baton.EUNAVAILABLE, err, "checking %s", dest)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return "", baton.Invalid("--dest", "%s is a symbolic link to a missing file (%v): put follows links and writes their target, so create the target or name it", dest, err)
		}
		abs = target
		if fi, err = os.Stat(abs); err != nil {
			return "", baton.Wrap(baton.EUNAVAILABLE, err, "checking %s", abs)
		}
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(dir, filepath.Base(abs))
	}
	if fi.IsDir() {
		return "", baton.Invalid("--dest", "%s is a directory: name the file to write", dest)
	}
	if !fi.Mode().IsRegular() {
		return "", baton.Invalid("--dest", "%s is not a regular file (%s)", dest, fi.Mode().Type())
	}
	return abs, nil
}

// defaultResource names dest's fence: its file name, for people, and a
// hash of the job and the resolved path, so that no two destinations
// share one.
func defaultResource(job, dest string) string {
	sum := sha256.Sum256([]byte(job + "\x00" + dest))
	base := filepath.Base(dest)
	if len(base) > 100 {
		base = strings.ToValidUTF8(base[:100], "")
	}
	base = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, base)
	return base + "@" + hex.EncodeToString(sum[:8])
}

// createTemp makes the temporary file beside dest, holding its flock as
// long as it lives: a temporary file that nobody has locked belongs to a
// put that died, and the next put removes it.
func createTemp(dest string) (*os.File, error) {
	for range 4 {
		tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".baton-*")
		if err != nil {
			return nil, baton.Wrap(baton.EUNAVAILABLE, err, "creating a temporary file beside %s", dest)
		}
		if err := unix.Flock(int(tmp.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return nil, baton.Wrap(baton.EUNAVAILABLE, err, "locking %s", tmp.Name())
		}
		// Another put may have taken it for stale between its creation and
		// the lock, and removed it.
		var a, b unix.Stat_t
		if unix.Fstat(int(tmp.Fd()), &a) == nil && unix.Lstat(tmp.Name(), &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			return tmp, nil
		}
		tmp.Close()
	}
	return nil, baton.Errorf(baton.EUNAVAILABLE, "the temporary file beside %s keeps disappearing", dest)
}

// removeStaleTemps removes dest's temporary files whose put is gone: those
// that nobody holds locked.
func removeStaleTemps(dest, mine string) {
	names, _ := filepath.Glob(filepath.Join(globQuote(filepath.Dir(dest)), globQuote("."+filepath.Base(dest)+".baton-")+"*"))
	for _, name := range names {
		if name == mine {
			continue
		}
		f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var a, b unix.Stat_t
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil &&
			unix.Fstat(int(f.Fd()), &a) == nil && a.Mode&unix.S_IFMT == unix.S_IFREG &&
			unix.Lstat(name, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			os.Remove(name)
		}
		f.Close()
	}
}

func globQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// produce writes the data to tmp: stdin, --from's file, or the output of
// command, which must exit 0.
func (c *PutCommand) produce(ctx context.Context, tmp *os.File, command []string) (int64, error) {
	switch {
	case command != nil:
		cmd := exec.CommandContext(ctx, command[0], command[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = c.env.Stdin, tmp, c.env.Stderr
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code := exit.ExitCode()
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			fmt.Fprintf(c.env.Stderr, "baton put: %s %v; nothing was written\n", command[0], exit)
			return 0, ExitError{code}
		case errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(c.env.Stderr, "baton put: %v; nothing was written\n", err)
			return 0, ExitError{127}
		case err != nil:
			fmt.Fprintf(c.env.Stderr, "baton put: %v; nothing was written\n", err)
			return 0, ExitError{126}
		}
		fi, err := tmp.Stat()
		if err != nil {
			return 0, baton.Wrap(baton.EUNAVAILABLE, err, "checking %s", tmp.Name())
		}
		return fi.Size(), nil
	case c.from != "":
		f, err := os.Open(c.from)
		if err != nil {
			return 0, baton.Invalid("--from", "%v", err)
		}
		defer f.Close()
		n, err := io.Copy(tmp, f)
		if err != nil {
			return 0, baton.Wrap(baton.EUNAVAILABLE, err, "copying %s to %s", c.from, tmp.Name())
		}
		return n, nil
	}
	n, err := io.Copy(tmp, c.env.Stdin)
	if err != nil {
		return 0, baton.Wrap(baton.EUNAVAILABLE, err, "writing %s", tmp.Name())
	}
	return n, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "opening %s", dir)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "syncing %s", dir)
	}
	return nil
}
