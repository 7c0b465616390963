package domain

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Pairing is what the demo keeps, in its database, of the console
// session it printed the link and the MCP token of: the SHA-256 of the
// session's credentials (never the credentials) and its public id, so
// that a restart on the same database makes the same session again and
// the agents, links and pages configured with it keep working.
type Pairing struct {
	// Name says whose pairing it is: the replica's name, "" for a lone
	// demo.
	Name string
	// SessionID is the session's public id.
	SessionID string
	// Cookie, Token and Join are the SHA-256 of the browser cookie, the
	// MCP bearer token and the join code.
	Cookie, Token, Join [32]byte
	// Created is when the session was first made.
	Created time.Time
}

// pairingsTable is made on first use, outside the numbered migrations:
// a database of an earlier release gains it without a new schema
// version (which its replicas, still running during a rolling deploy,
// would refuse).
const pairingsTable = `CREATE TABLE IF NOT EXISTS console_pairings (
	name          {text} PRIMARY KEY,
	session_id    TEXT NOT NULL,
	cookie_sha256 TEXT NOT NULL,
	token_sha256  TEXT NOT NULL,
	join_sha256   TEXT NOT NULL,
	created_at    TEXT NOT NULL
)`

// ensurePairings makes the pairings table if it is not there.
func (s *Store) ensurePairings(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.lockSchema(ctx, tx); err != nil { // Stores making it at once
		return err
	}
	if _, err := tx.ExecContext(ctx, s.dialect.sql(pairingsTable)); err != nil {
		return err
	}
	return tx.Commit()
}

// SavePairing keeps p, in place of the pairing of the same name.
func (s *Store) SavePairing(ctx context.Context, p Pairing) error {
	if !storable(p.Name) || !storable(p.SessionID) || p.SessionID == "" {
		return fmt.Errorf("%w: a pairing needs a session id, and text both databases store", ErrInvalid)
	}
	if err := s.ensurePairings(ctx); err != nil {
		return fmt.Errorf("domain: save the pairing: %w", err)
	}
	if p.Created.IsZero() {
		p.Created = s.now()
	}
	_, err := s.db.ExecContext(ctx, s.dialect.sql(`INSERT INTO console_pairings (name, session_id, cookie_sha256, token_sha256, join_sha256, created_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET session_id = excluded.session_id, cookie_sha256 = excluded.cookie_sha256,
			token_sha256 = excluded.token_sha256, join_sha256 = excluded.join_sha256, created_at = excluded.created_at`),
		p.Name, p.SessionID, hex.EncodeToString(p.Cookie[:]), hex.EncodeToString(p.Token[:]), hex.EncodeToString(p.Join[:]), formatTime(p.Created))
	if err != nil {
		return fmt.Errorf("domain: save the pairing: %w", err)
	}
	return nil
}

// ErrNoPairing: no pairing of that name is kept.
var ErrNoPairing = errors.New("domain: no pairing")

// Pairing returns the pairing of name, or ErrNoPairing when there is
// none.
func (s *Store) Pairing(ctx context.Context, name string) (Pairing, error) {
	if err := s.ensurePairings(ctx); err != nil {
		return Pairing{}, fmt.Errorf("domain: read the pairing: %w", err)
	}
	var cookie, token, join, created string
	p := Pairing{Name: name}
	err := s.db.QueryRowContext(ctx, s.dialect.sql(`SELECT session_id, cookie_sha256, token_sha256, join_sha256, created_at
		FROM console_pairings WHERE name = ?`), name).Scan(&p.SessionID, &cookie, &token, &join, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Pairing{}, ErrNoPairing
	}
	if err != nil {
		return Pairing{}, fmt.Errorf("domain: read the pairing: %w", err)
	}
	for _, f := range []struct {
		text string
		to   *[32]byte
	}{{cookie, &p.Cookie}, {token, &p.Token}, {join, &p.Join}} {
		b, err := hex.DecodeString(f.text)
		if err != nil || len(b) != len(f.to) {
			return Pairing{}, errors.New("domain: read the pairing: a malformed hash")
		}
		copy(f.to[:], b)
	}
	if p.Created, err = parseTime(created); err != nil {
		return Pairing{}, fmt.Errorf("domain: read the pairing: %w", err)
	}
	return p, nil
}
