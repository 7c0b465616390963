package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// auditRow is one record as written: a row of agentsurface_audit in
// COPY's binary format, encoded by the Record that made it (so that the
// writer, which is alone, only copies it), and what logs say of it.
type auditRow struct {
	data            []byte
	typ, invocation string
}

// String describes the row in logs: its type and invocation id.
func (r auditRow) String() string { return r.typ + " " + r.invocation }

// auditFields are the columns of a row, in the order of auditColumns. An
// empty string is NULL, except in replica and type, which are never NULL.
type auditFields struct {
	replica, session                     string
	at                                   time.Time
	typ, capability, registration        string
	invocation, confirmation, consumer   string
	status, code                         string
	durationMs, queueWaitMs, executionMs *int64
	actor, reason                        string
	input, output                        string // JSON text
	truncated                            bool
}

var auditColumns = []string{"replica", "session", "at", "type", "capability_id", "registration_id",
	"invocation_id", "confirmation_id", "consumer_id", "status", "code", "duration_ms", "queue_wait_ms",
	"execution_ms", "actor", "reason", "input", "output", "truncated"}

// copySQL starts a COPY of audit rows in PostgreSQL's binary format.
var copySQL = "COPY agentsurface_audit (" + strings.Join(auditColumns, ", ") + ") FROM STDIN BINARY"

// auditStore is where an AuditSink's writes go: statements sent one after
// the other on one connection, each one COPY and one commit, whose
// results come back in the order they were sent. The sink's writer is
// its only user.
type auditStore interface {
	// send sends one statement writing rows, to be done by end.
	send(rows []auditRow, end time.Time) error
	// receive waits, at most until end, for the result of the oldest
	// statement sent and not yet received: nil when its rows are
	// committed, a *pgconn.PgError when Postgres refused them (the
	// store stays usable), any other error when the connection broke,
	// with whatever was in flight (call reset).
	receive(end time.Time) error
	// reset drops the connection and what is in flight on it; the next
	// send opens another.
	reset()
}

// pgStore is the auditStore of a pool: a connection of its own, taken
// out of the pool, on which it runs the COPY exchange itself, one write
// and one read a statement (pgx's CopyFrom costs two goroutines, a pipe
// and three writes, about twice the CPU of a small batch's commit here).
type pgStore struct {
	pool *pgxpool.Pool
	conn *pgx.Conn // nil until the first send, and after reset
	fe   *pgproto3.Frontend
	nc   net.Conn
	buf  []byte // the last statement's COPY data, reused
}

func (p *pgStore) open(end time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	pc, err := p.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack() // from now on, the store closes it
	if err := conn.PgConn().SyncConn(ctx); err != nil {
		_ = conn.Close(ctx)
		return err
	}
	p.conn, p.fe, p.nc = conn, conn.PgConn().Frontend(), conn.PgConn().Conn()
	return nil
}

func (p *pgStore) send(rows []auditRow, end time.Time) error {
	if p.conn == nil {
		if err := p.open(end); err != nil {
			return err
		}
	}
	p.buf = appendCopyData(p.buf[:0], rows)
	p.fe.Send(&pgproto3.Query{String: copySQL})
	for data := p.buf; len(data) > 0; {
		n := min(len(data), 64<<10) // the size of pgx's CopyData messages
		p.fe.Send(&pgproto3.CopyData{Data: data[:n]})
		data = data[n:]
	}
	p.fe.Send(&pgproto3.CopyDone{})
	if err := p.nc.SetWriteDeadline(end); err != nil {
		return err
	}
	return p.fe.Flush()
}

func (p *pgStore) receive(end time.Time) error {
	if p.conn == nil {
		return errors.New("replica: audit store: nothing sent")
	}
	if err := p.nc.SetReadDeadline(end); err != nil {
		return err
	}
	var refused error
	for {
		msg, err := p.fe.Receive()
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			refused = pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ReadyForQuery:
			// The statement's end: its CopyInResponse, CommandComplete,
			// and any notice came before.
			return refused
		}
	}
}

func (p *pgStore) reset() {
	if p.conn == nil {
		return
	}
	_ = p.nc.Close() // whatever is in flight; Close below then only tidies up
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = p.conn.Close(ctx)
	cancel()
	p.conn, p.fe, p.nc = nil, nil, nil
}

// pgEpoch is where PostgreSQL's binary timestamps count from, in Unix
// microseconds.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// appendCopyData appends rows to buf as the data of a COPY in binary
// format: a header, the rows, a trailer.
func appendCopyData(buf []byte, rows []auditRow) []byte {
	buf = append(buf, "PGCOPY\n\xff\r\n\x00"...)
	buf = binary.BigEndian.AppendUint32(buf, 0) // flags
	buf = binary.BigEndian.AppendUint32(buf, 0) // header extension length
	for _, r := range rows {
		buf = append(buf, r.data...)
	}
	return binary.BigEndian.AppendUint16(buf, 0xFFFF)
}

// encode returns the row of f: its fields as length and bytes (length
// -1: NULL).
func (f *auditFields) encode() auditRow {
	n := 2 + 4*len(auditColumns) + 3*8 + 8 + 1 + len(f.replica) + len(f.session) + len(f.typ) +
		len(f.capability) + len(f.registration) + len(f.invocation) + len(f.confirmation) + len(f.consumer) +
		len(f.status) + len(f.code) + len(f.actor) + len(f.reason) + len(f.input) + len(f.output)
	buf := make([]byte, 0, n)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(auditColumns)))
	buf = appendString(buf, f.replica)
	buf = appendText(buf, f.session)
	buf = appendInt8(buf, f.at.UnixMicro()-pgEpoch)
	buf = appendString(buf, f.typ)
	for _, s := range [...]string{f.capability, f.registration, f.invocation, f.confirmation,
		f.consumer, f.status, f.code} {
		buf = appendText(buf, s)
	}
	for _, n := range [...]*int64{f.durationMs, f.queueWaitMs, f.executionMs} {
		if n == nil {
			buf = appendNull(buf)
		} else {
			buf = appendInt8(buf, *n)
		}
	}
	for _, s := range [...]string{f.actor, f.reason, f.input, f.output} {
		buf = appendText(buf, s) // json's binary form is its text
	}
	buf = binary.BigEndian.AppendUint32(buf, 1)
	if f.truncated {
		buf = append(buf, 1)
	} else {
		buf = append(buf, 0)
	}
	return auditRow{data: buf, typ: f.typ, invocation: f.invocation}
}

// appendText appends s as a text field, "" as NULL.
func appendText(buf []byte, s string) []byte {
	if s == "" {
		return appendNull(buf)
	}
	return appendString(buf, s)
}

// appendString appends s as a text field.
func appendString(buf []byte, s string) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
	return append(buf, s...)
}

func appendInt8(buf []byte, n int64) []byte {
	buf = binary.BigEndian.AppendUint32(buf, 8)
	return binary.BigEndian.AppendUint64(buf, uint64(n))
}

func appendNull(buf []byte) []byte { return binary.BigEndian.AppendUint32(buf, 0xFFFFFFFF) }
