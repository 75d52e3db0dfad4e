package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/batonhq/baton"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// FenceRelation is the name under which ExecFenced's statement reads the
// fence: a relation with one row, the job's lease row (its column
// fencing_token), while the token is the job's term.
const FenceRelation = "baton_fence"

// Execer is what ExecFenced needs: a pgx.Tx, a pgx.Conn or a pool. Outside
// a transaction the statement is a transaction of its own, fenced alike.
type Execer interface {
	Querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ExecFenced runs one statement, sql with its args, fenced by the job's
// lease in the statement itself: the same check as FenceLease, at the cost
// of no statement of its own. sql must read baton_fence (FenceRelation),
// which ExecFenced defines in a WITH clause before it:
//
//	insert into results (job, v) select $1, $2 from baton_fence
//	update results set v = $2 from baton_fence where id = $1
//	delete from results using baton_fence where id = $1
//	insert into results (id, v) select $1, $2 from baton_fence on conflict (id) do update set v = excluded.v
//
// baton_fence reads the lease row FOR KEY SHARE, as FenceLease does: a
// takeover waits for the caller's transaction to end, so what the
// statement writes commits under token only if no newer term existed up to
// the commit. When a newer term has been granted, reading baton_fence
// raises and the statement fails as EFENCED (a token never issued: the
// same); at REPEATABLE READ or SERIALIZABLE a term granted after the
// snapshot is ECONFLICT, as with FenceLease.
//
// So that no row is written without baton_fence's, read it in FROM, in
// USING, in an inner JOIN or in WHERE EXISTS. A job whose lease row is gone
// has no row there; a statement with an outer join (LEFT, RIGHT or FULL
// JOIN), which could write rows without it, is refused as EINVALID before
// it runs, and so is one that does not read baton_fence at all (comments,
// quoted text and a qualified name such as x.baton_fence aside) or that
// holds a second statement after a ';'. When the statement affects no
// row, ExecFenced checks the fence on its own (FenceLease) to tell a
// refused fence from a statement that matched nothing.
//
// args are positional ($1, $2, …), optionally after pgx's query options
// (pgx.QueryExecModeSimpleProtocol, …); ExecFenced appends the job and
// the token after them. Named arguments (pgx.NamedArgs) are refused. An
// error of the statement itself (a unique violation, …) is returned as
// pgx returns it.
func ExecFenced(ctx context.Context, tx Execer, schema, job string, token int64, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := baton.ValidateJobName(job); err != nil {
		return pgconn.CommandTag{}, err
	}
	if token < 1 {
		return pgconn.CommandTag{}, baton.Invalid("token", "%d is not a fencing token (want an integer >= 1)", token)
	}
	n := len(args)
	for i, a := range args {
		switch a.(type) {
		case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
			if i == len(args)-n {
				n-- // a leading query option, not a parameter
			}
		case pgx.QueryRewriter:
			return pgconn.CommandTag{}, baton.Invalid("args", "ExecFenced takes positional arguments ($1, $2, …), not %T", a)
		}
	}
	fenced, err := fencedStatement(orDefault(schema), sql, n)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	// A new slice: appending to args could write into the caller's array.
	tag, err := tx.Exec(ctx, fenced, append(append(make([]any, 0, len(args)+2), args...), job, token)...)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			switch pgErr.Code {
			case sqlStateFenced, sqlStateNeverIssued, sqlStateNoLease, "40001", "40P01":
				return tag, fenceError(err, job, token)
			}
		}
		return tag, err
	}
	if tag.RowsAffected() == 0 {
		// Nothing written: either baton_fence had no row (no lease row) or
		// the statement matched nothing. The caller learns which.
		return tag, FenceLease(ctx, tx, schema, job, token)
	}
	return tag, nil
}

// fencedStatements holds fenceStatement's results by schema, statement and
// argument count: a program fences a few statements many times, and each
// is scanned once. Past maxFencedStatements (a program that builds its
// statements), the rest are scanned each time.
var (
	fencedStatements    sync.Map // fencedKey → string
	fencedStatementsLen atomic.Int64
)

const maxFencedStatements = 1024

type fencedKey struct {
	schema, sql string
	args        int
}

func fencedStatement(schema, sql string, args int) (string, error) {
	k := fencedKey{schema, sql, args}
	if s, ok := fencedStatements.Load(k); ok {
		return s.(string), nil
	}
	s, err := fenceStatement(schema, sql, args+1, args+2)
	if err == nil && fencedStatementsLen.Load() < maxFencedStatements {
		if _, loaded := fencedStatements.LoadOrStore(k, s); !loaded {
			fencedStatementsLen.Add(1)
		}
	}
	return s, err
}

// fenceStatement is sql with baton_fence defined before it (in sql's own
// WITH clause, if it has one), the job as parameter $jobArg and the token
// as $tokenArg.
func fenceStatement(schema, sql string, jobArg, tokenArg int) (string, error) {
	words := sqlWords(sql)
	reads := false
	for i, w := range words {
		if w.text == FenceRelation && (i == 0 || words[i-1].text != ".") {
			reads = true
		}
		if w.text == ";" && !w.quoted && i < len(words)-1 {
			return "", baton.Invalid("sql", "ExecFenced runs one statement, and this has more after a ';': fence each with a call of its own")
		}
		if w.text == "join" && !w.quoted && i > 0 {
			kind := words[i-1]
			if kind.text == "outer" && i > 1 {
				kind = words[i-2]
			}
			switch kind.text {
			case "left", "right", "full":
				if !kind.quoted {
					return "", baton.Invalid("sql", "the statement has a %s join, which could write rows without baton_fence's: read baton_fence in FROM, USING, an inner JOIN or WHERE EXISTS", kind.text)
				}
			}
		}
	}
	if !reads {
		return "", baton.Invalid("sql", "the statement does not read %s, so it would not be fenced: read it in FROM, USING, an inner JOIN or WHERE EXISTS, e.g. insert into results (v) select $1 from %s", FenceRelation, FenceRelation)
	}
	j, t := "$"+strconv.Itoa(jobArg)+"::text", "$"+strconv.Itoa(tokenArg)+"::bigint"
	s := pgx.Identifier{schema}.Sanitize()
	// The token is compared in the projection, below the row lock: a lease
	// row changed by a takeover while this statement waited for the lock
	// is read again after it (READ COMMITTED's recheck), and a token that
	// is not the job's term then raises through fence_lease, which names
	// why (stale, never issued).
	cte := fmt.Sprintf("%s as (select case when fencing_token = %s then fencing_token else %s.fence_lease(%s, %s) end as fencing_token from %s.job_leases where job_key = %s for key share)",
		FenceRelation, t, s, j, t, s, j)
	if len(words) > 0 && words[0].text == "with" && !words[0].quoted {
		at := words[0].end
		if len(words) > 1 && words[1].text == "recursive" && !words[1].quoted {
			at = words[1].end
		}
		return sql[:at] + " " + cte + ", " + sql[at:], nil
	}
	return "with " + cte + "\n" + sql, nil
}

// sqlWord is a keyword, an identifier, a dot or a semicolon of a
// statement: lower-cased unless it was double-quoted.
type sqlWord struct {
	text   string
	quoted bool
	end    int // the byte offset after it
}

// sqlWords are sql's keywords, identifiers, dots and semicolons, in
// order, without what is in comments, string constants (also escaped and
// dollar-quoted) and parameters.
func sqlWords(sql string) []sqlWord {
	var words []sqlWord
	isStart := func(c byte) bool { return c == '_' || c >= 0x80 || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c == '$' || c >= '0' && c <= '9' }
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			if k := strings.IndexByte(sql[i:], '\n'); k >= 0 {
				i += k + 1
			} else {
				i = len(sql)
			}
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			depth := 0 // comments nest
			for i < len(sql) {
				if strings.HasPrefix(sql[i:], "/*") {
					depth++
					i += 2
				} else if strings.HasPrefix(sql[i:], "*/") {
					depth--
					i += 2
					if depth == 0 {
						break
					}
				} else {
					i++
				}
			}
		case c == '\'':
			backslash := i > 0 && (sql[i-1] == 'e' || sql[i-1] == 'E') && (i == 1 || !isPart(sql[i-2]))
			for i++; i < len(sql); i++ {
				if backslash && sql[i] == '\\' {
					i++
				} else if sql[i] == '\'' {
					if i+1 < len(sql) && sql[i+1] == '\'' {
						i++
					} else {
						break
					}
				}
			}
			i++
		case c == '"':
			var b strings.Builder
			for i++; i < len(sql); i++ {
				if sql[i] == '"' {
					if i+1 < len(sql) && sql[i+1] == '"' {
						i++
					} else {
						break
					}
				}
				b.WriteByte(sql[i])
			}
			i++
			words = append(words, sqlWord{text: b.String(), quoted: true, end: min(i, len(sql))})
		case c == '$':
			k := i + 1
			for k < len(sql) && isPart(sql[k]) && sql[k] != '$' {
				k++
			}
			if k < len(sql) && sql[k] == '$' && (k == i+1 || isStart(sql[i+1])) {
				tag := sql[i : k+1] // $$ or $tag$: a dollar-quoted constant
				if e := strings.Index(sql[k+1:], tag); e >= 0 {
					i = k + 1 + e + len(tag)
				} else {
					i = len(sql)
				}
			} else {
				i = k // a parameter, $1
			}
		case isStart(c):
			k := i + 1
			for k < len(sql) && isPart(sql[k]) {
				k++
			}
			words = append(words, sqlWord{text: strings.ToLower(sql[i:k]), end: k})
			i = k
		case c == '.' || c == ';':
			// Kept: a qualified name (x.baton_fence is not the fence) and
			// the end of a statement.
			words = append(words, sqlWord{text: sql[i : i+1], end: i + 1})
			i++
		default:
			i++
		}
	}
	return words
}
