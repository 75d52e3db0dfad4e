package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

const fenceHelp = `
Usage: baton fence show [--json] RESOURCE
       baton fence reset [--yes] [--to TOKEN] RESOURCE

Reads or resets a resource's fencing high-water mark: the highest token
that wrote it (baton put, or a fence in your own PostgreSQL transactions).
The marks are in the PostgreSQL store's fence table with --db or BATON_DB,
else in the local store's lock directory.

A mark only rises, and that is what refuses a stale writer. reset is for
the day a mark is wrong: raised by a token that was never issued (a spoofed
or mistyped BATON_FENCING_TOKEN pins it, and every real writer is then
refused), or left above a job's tokens after the job's lease store was
rebuilt. Reset it only when no writer of the resource is running, to the
highest token that really wrote it (--to), or to none (no --to: every token
passes once). A reset asks for confirmation on a terminal, or needs --yes,
and logs a line on stderr saying who reset what from which mark.

Exit status: 0 done; 64 usage error (bad resource or token, reset without
--yes and without a terminal, or not confirmed); 69 the store could not be
reached; 70 internal error (e.g. a damaged fence file, which show reports
and reset overwrites).

Examples:
  # the high-water mark of the resource that baton put --resource report writes
  baton fence show report

  # set it back to 42, the highest token that really wrote it, without asking
  baton fence reset --yes --to 42 report
`

// FenceCommand is `baton fence`.
type FenceCommand struct {
	env   *Env
	store storeFlags
	json  bool
	yes   bool
	to    int64
}

// Run shows or resets a mark.
func (c *FenceCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("fence", c.env.Stdout, fenceHelp)
	c.store.register(fs)
	fs.BoolVar(&c.json, "json", false, "show: print {\"resource\":…,\"token\":…} (token null when there is no mark)")
	fs.BoolVar(&c.yes, "yes", false, "reset: do it without asking")
	fs.Int64Var(&c.to, "to", 0, "reset: set the mark to `TOKEN` (default: no mark)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || pos[0] != "show" && pos[0] != "reset" {
		return baton.Invalid("arguments", "want show RESOURCE or reset RESOURCE, got %q", pos)
	}
	verb, resource := pos[0], pos[1]
	if err := baton.ValidateResource(resource); err != nil {
		return err
	}
	if c.to < 0 || c.to > 1<<62 || verb == "reset" && c.to == 0 && fsHas(args, "to") {
		return baton.Invalid("--to", "%d is not a fencing token (want an integer in 1..2^62)", c.to)
	}
	dsn, _, err := c.store.dsn(c.env)
	if err != nil {
		return err
	}
	var marks fenceMarks
	if dsn == "" {
		dir, scope, explicit, err := c.store.local(c.env)
		if err != nil {
			return err
		}
		l, err := flock.Open(dir, scope, explicit)
		if err != nil {
			return err
		}
		marks = localMarks{l.HighWater()}
	} else {
		st, err := c.store.open(ctx, c.env, "fence", true)
		if err != nil {
			return err
		}
		defer st.close()
		marks = pgMarks{st}
	}
	token, ok, err := marks.mark(ctx, resource)
	if verb == "show" {
		if err != nil {
			return err
		}
		if c.json {
			var t any
			if ok {
				t = token
			}
			b, _ := json.Marshal(map[string]any{"resource": resource, "token": t})
			fmt.Fprintf(c.env.Stdout, "%s\n", b)
		} else if ok {
			fmt.Fprintf(c.env.Stdout, "%s %d\n", resource, token)
		} else {
			fmt.Fprintf(c.env.Stdout, "%s no mark\n", resource)
		}
		return nil
	}
	from := "no mark"
	switch {
	case err != nil && baton.ErrorCode(err) == baton.EINTERNAL:
		from = "a damaged mark"
	case err != nil:
		return err
	case ok:
		from = strconv.FormatInt(token, 10)
	}
	to := "no mark"
	if c.to > 0 {
		to = strconv.FormatInt(c.to, 10)
	}
	if !c.yes {
		if err := c.confirm(fmt.Sprintf("Reset the fence of %s from %s to %s? Writers with tokens below its real mark will then pass. [y/N] ", resource, from, to)); err != nil {
			return err
		}
	}
	if err := marks.reset(ctx, resource, c.to); err != nil {
		return err
	}
	who := "unknown user"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	host, _ := os.Hostname()
	fmt.Fprintf(c.env.Stderr, "baton fence: %s@%s reset the fence of %s from %s to %s\n", who, host, resource, from, to)
	return nil
}

func fsHas(args []string, name string) bool {
	for _, a := range args {
		if a == "-"+name || a == "--"+name || strings.HasPrefix(a, "-"+name+"=") || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}

// confirm asks on the terminal; without one, it refuses.
func (c *FenceCommand) confirm(question string) error {
	f, ok := c.env.Stdin.(*os.File)
	if !ok {
		return baton.Invalid("--yes", "baton fence reset asks for confirmation on a terminal, and stdin is none: give --yes")
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return baton.Invalid("--yes", "baton fence reset asks for confirmation on a terminal, and stdin is none: give --yes")
	}
	fmt.Fprint(c.env.Stderr, question)
	line, _ := bufio.NewReader(f).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return baton.Invalid("confirmation", "not confirmed; nothing changed")
	}
	return nil
}

// fenceMarks are a store's high-water marks, for the operator.
type fenceMarks interface {
	mark(ctx context.Context, resource string) (int64, bool, error)
	reset(ctx context.Context, resource string, to int64) error // to 0: no mark
}

type localMarks struct{ hw *flock.HighWater }

func (m localMarks) mark(ctx context.Context, resource string) (int64, bool, error) {
	return m.hw.Mark(ctx, resource)
}

// reset to no mark sets the file's mark to 1, which every token passes: the
// file stays, as lock files do.
func (m localMarks) reset(ctx context.Context, resource string, to int64) error {
	_, err := m.hw.Reset(ctx, resource, max(to, 1))
	return err
}

// pgMarks reads and resets rows of the fence table directly: postgres.Fence
// only raises a mark, by design.
type pgMarks struct{ st *store }

func (m pgMarks) table() string {
	return pgx.Identifier{m.st.db.Schema(), "fence"}.Sanitize()
}

func (m pgMarks) mark(ctx context.Context, resource string) (int64, bool, error) {
	var token int64
	err := m.st.db.Pool().QueryRow(ctx, "select token from "+m.table()+" where resource = $1", resource).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, baton.Wrap(baton.EUNAVAILABLE, err, "reading the fence of %s", resource)
	}
	return token, true, nil
}

func (m pgMarks) reset(ctx context.Context, resource string, to int64) error {
	var err error
	if to == 0 {
		_, err = m.st.db.Pool().Exec(ctx, "delete from "+m.table()+" where resource = $1", resource)
	} else {
		_, err = m.st.db.Pool().Exec(ctx, "insert into "+m.table()+" (resource, token) values ($1, $2) on conflict (resource) do update set token = excluded.token, updated_at = clock_timestamp()", resource, to)
	}
	if err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "resetting the fence of %s", resource)
	}
	return nil
}
