package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/batonhq/baton/internal/sqldialect"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// OpenSQL gives pool as a database/sql handle, as DB.SQL does: each of its
// connections is borrowed from pool (so the pool's MaxConns bounds both),
// and is pgx's own driver connection with one thing more, the round trips
// of sqldialect.Pipeliner, which package idempotency uses to claim a key
// with BEGIN and store the answer with COMMIT.
//
// A caller of sql.Conn.Raw gets a *SQLConn, whose field Conn is pgx's
// *stdlib.Conn (and Conn.Conn() the *pgx.Conn).
func OpenSQL(pool *pgxpool.Pool) *sql.DB {
	db := sql.OpenDB(connector{stdlib.GetPoolConnector(pool)})
	db.SetMaxIdleConns(0) // idle connections go back to pool, as stdlib.OpenDBFromPool does
	return db
}

type connector struct{ driver.Connector }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &SQLConn{Conn: dc.(*stdlib.Conn)}, nil
}

// SQLConn is the driver connection of OpenSQL's handles: pgx's, which it
// embeds, and sqldialect.Pipeliner.
type SQLConn struct {
	*stdlib.Conn
	begun      bool         // BeginQueryRows began a transaction: the next BeginTx is it
	open       *pipelinedTx // that transaction, once BeginTx gave it, until it ends
	commitWith *pgx.Batch   // what open's Commit sends before COMMIT
}

var _ sqldialect.Pipeliner = (*SQLConn)(nil)

// BeginQueryRows implements sqldialect.Pipeliner.
func (c *SQLConn) BeginQueryRows(ctx context.Context, rows ...sqldialect.Row) error {
	if c.begun {
		return errors.New("postgres: BeginQueryRows: a transaction it began is still open")
	}
	pg := c.Conn.Conn()
	if pg.IsClosed() {
		return driver.ErrBadConn
	}
	b := &pgx.Batch{}
	b.Queue("begin")
	for _, r := range rows {
		b.Queue(r.Query, r.Args...)
	}
	br := pg.SendBatch(ctx, b)
	_, err := br.Exec()
	for _, r := range rows {
		if err != nil {
			break
		}
		err = br.QueryRow().Scan(r.Dest...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		c.endFailed(ctx)
		return err
	}
	c.begun = true
	return nil
}

// CommitWith implements sqldialect.Pipeliner.
func (c *SQLConn) CommitWith(query string, args ...any) error {
	if c.open == nil {
		return errors.New("postgres: CommitWith: no transaction that BeginQueryRows began is open on the connection")
	}
	c.commitWith = &pgx.Batch{}
	c.commitWith.Queue(query, args...)
	return nil
}

// BeginTx gives the transaction BeginQueryRows began, or begins one as pgx's
// connection does.
func (c *SQLConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if !c.begun {
		return c.Conn.BeginTx(ctx, opts)
	}
	c.begun = false
	if opts != (driver.TxOptions{}) {
		c.endFailed(ctx)
		return nil, errors.New("postgres: BeginQueryRows began a transaction with the default options, and BeginTx asked for others")
	}
	c.open = &pipelinedTx{c: c, ctx: ctx}
	return c.open, nil
}

// endFailed rolls back whatever transaction a failed statement left open.
func (c *SQLConn) endFailed(ctx context.Context) {
	if pg := c.Conn.Conn(); !pg.IsClosed() && pg.PgConn().TxStatus() != 'I' {
		c.rollback(ctx)
		return
	}
	c.begun, c.open, c.commitWith = false, nil, nil
}

// rollback ends the connection's transaction, even when ctx has ended (as
// database/sql's own rollback of a transaction whose context ended is), so
// that the connection stays fit for the pool; within 5 s, or it closes the
// connection, which the pool then drops.
func (c *SQLConn) rollback(ctx context.Context) error {
	c.begun, c.open, c.commitWith = false, nil, nil
	pg := c.Conn.Conn()
	if pg.IsClosed() {
		return driver.ErrBadConn
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := pg.Exec(ctx, "rollback"); err != nil {
		pg.Close(ctx) // its state is unknown
		return err
	}
	return nil
}

// pipelinedTx is a transaction begun by BeginQueryRows.
type pipelinedTx struct {
	c   *SQLConn
	ctx context.Context
}

func (t *pipelinedTx) Commit() error {
	pg := t.c.Conn.Conn()
	b := t.c.commitWith
	t.c.open, t.c.commitWith = nil, nil
	if b == nil {
		b = &pgx.Batch{}
	}
	b.Queue("commit")
	br := pg.SendBatch(t.ctx, b)
	var err error
	for range b.Len() - 1 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.c.endFailed(t.ctx)
		return err
	}
	if tag.String() == "ROLLBACK" { // the transaction had failed before
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback rolls back even when the transaction's context has ended (rollback).
func (t *pipelinedTx) Rollback() error { return t.c.rollback(t.ctx) }
