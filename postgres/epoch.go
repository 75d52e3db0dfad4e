package postgres

import (
	"context"
	"fmt"

	"github.com/batonhq/baton"
	"github.com/jackc/pgx/v5"
)

// EpochBits is how far a token's epoch is shifted: a token is
// epoch << EpochBits | counter (0011_token_epoch.sql). A job can take 2^32-1
// terms in one epoch; tokens stay below 2^53, exact in a JSON number, while
// the epoch stays below 2^21.
const EpochBits = 32

// TokenEpoch is the epoch a token was issued in.
func TokenEpoch(token int64) int64 { return token >> EpochBits }

// Epoch is where the schema's fencing tokens stand.
type Epoch struct {
	// Timeline is the server's: a promotion or a point-in-time recovery
	// starts a new one.
	Timeline int64 `json:"timeline"`
	// Offset is added by baton migrate --new-epoch.
	Offset int64 `json:"offset"`
	// Epoch is Timeline - 1 + Offset: every token issued now is above
	// Epoch << 32.
	Epoch int64 `json:"epoch"`
	// HighestToken is the highest token of the schema's lease rows and
	// their floor; HighestEpoch is its epoch.
	HighestToken int64 `json:"highest_token"`
	HighestEpoch int64 `json:"highest_epoch"`
	// SystemIdentifier is this server's cluster; RecordedSystemIdentifier
	// the one where the epoch was last set (by the migration, or by
	// --new-epoch). They differ after a dump and restore or a move to
	// another cluster: a promoted standby keeps its primary's.
	SystemIdentifier         string `json:"system_identifier"`
	RecordedSystemIdentifier string `json:"recorded_system_identifier"`
	Reason                   string `json:"reason"`
}

// Moved reports whether the schema is on another cluster than the one its
// epoch was set on.
func (e Epoch) Moved() bool {
	return e.RecordedSystemIdentifier != "" && e.RecordedSystemIdentifier != e.SystemIdentifier
}

// Warning says, in one line, why tokens may go back here, or "" when
// nothing suggests they may.
func (e Epoch) Warning(schema string) string {
	switch {
	case e.Moved():
		return fmt.Sprintf("schema %s was set up on PostgreSQL cluster %s and is now on cluster %s (restored from a dump or moved): tokens issued after the copy was taken may be issued again; run baton migrate --new-epoch before any job runs (docs/FAILOVER.md)",
			schema, e.RecordedSystemIdentifier, e.SystemIdentifier)
	case e.HighestEpoch > e.Epoch:
		return fmt.Sprintf("schema %s holds tokens of epoch %d but the server is at epoch %d (timeline %d): it was restored or moved; run baton migrate --new-epoch before any job runs (docs/FAILOVER.md)",
			schema, e.HighestEpoch, e.Epoch, e.Timeline)
	}
	return ""
}

// epochQuery reads the epoch and the highest token of the lease rows (few:
// one per job and overlap slot) and of the floor.
// The timeline comes back out of token_base(), the one place that reads it.
const epochQuery = `select (@schema@.token_base() >> 32) - e.epoch_offset + 1,
       e.epoch_offset, (pg_control_system()).system_identifier::text, e.system_identifier, e.reason,
       greatest((select max(fencing_token) from @schema@.job_leases),
                (select fencing_token from @schema@.lease_token_floor), 0)
  from @schema@.token_epoch e`

// Epoch reads where the schema's tokens stand. On a standby it fails:
// there is no epoch to speak of until it is promoted.
func (db *DB) Epoch(ctx context.Context) (Epoch, error) {
	e, err := readEpoch(ctx, db.pool, db.sub(epochQuery))
	return e, db.translate(err, "reading the token epoch")
}

type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readEpoch(ctx context.Context, q rowQuerier, query string) (Epoch, error) {
	var e Epoch
	err := q.QueryRow(ctx, query).Scan(&e.Timeline, &e.Offset, &e.SystemIdentifier, &e.RecordedSystemIdentifier, &e.Reason, &e.HighestToken)
	if err != nil {
		return Epoch{}, err
	}
	e.Epoch = e.Timeline - 1 + e.Offset
	e.HighestEpoch = TokenEpoch(e.HighestToken)
	return e, nil
}

// tokenColumns are every column of the schema that holds a fencing token
// baton issued or saw; NewEpoch goes above all of them.
var tokenColumns = []string{
	"select max(fencing_token) from @schema@.job_leases",
	"select fencing_token from @schema@.lease_token_floor",
	"select max(token) from @schema@.ticks",
	"select max(token) from @schema@.attempts",
	"select max(token) from @schema@.idempotency_keys",
	"select max(token) from @schema@.fence",
}

// NewEpoch starts a new epoch after a restore or a move to another
// cluster: above the epoch in force, above the epoch of every token the
// schema holds, and at least atLeast (0: no floor of the operator's). It
// records this server's system identifier, so the move is no longer
// reported. It serialises with migrations.
func (db *DB) NewEpoch(ctx context.Context, atLeast int64, reason string) (before, after Epoch, err error) {
	err = db.locked(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, db.sub("lock table @schema@.token_epoch in exclusive mode")); err != nil {
			return err
		}
		if before, err = readEpoch(ctx, tx, db.sub(epochQuery)); err != nil {
			return err
		}
		highest := before.HighestToken
		for _, q := range tokenColumns {
			var top *int64
			if err := tx.QueryRow(ctx, db.sub(q)).Scan(&top); err != nil {
				return err
			}
			if top != nil {
				highest = max(highest, *top)
			}
		}
		epoch := max(before.Epoch, TokenEpoch(highest)) + 1
		epoch = max(epoch, atLeast)
		offset := epoch - (before.Timeline - 1)
		if offset > 1<<31-1 {
			return baton.Invalid("epoch", "%d is too large: the offset would be %d, above 2^31-1", epoch, offset)
		}
		_, err := tx.Exec(ctx, db.sub(`update @schema@.token_epoch
   set epoch_offset = $1, system_identifier = (pg_control_system()).system_identifier::text,
       changed_at = clock_timestamp(), reason = $2`), offset, reason)
		if err != nil {
			return err
		}
		after, err = readEpoch(ctx, tx, db.sub(epochQuery))
		return err
	})
	return before, after, db.translate(err, "starting a new token epoch")
}
