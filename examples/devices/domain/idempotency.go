package domain

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// Idempotency keys of [Store.DisableOnce] and [Store.EnableOnce].
const (
	// MaxKeyLength is the longest idempotency key, in bytes.
	MaxKeyLength = 128
	// KeyRetention is how long a key is remembered after the call that
	// recorded it. A later call with the key executes again.
	KeyRetention = 24 * time.Hour
	// pruneBatch bounds the expired keys one keyed call deletes.
	pruneBatch = 100
)

// checkKey validates an idempotency key; "" is none.
func checkKey(key string) error {
	switch {
	case len(key) > MaxKeyLength:
		return &InvalidError{Field: "invocationId", Problem: "is too long"}
	case !storable(key):
		return &InvalidError{Field: "invocationId", Problem: problemText}
	}
	return nil
}

// request is a keyed Disable or Enable call, as recorded.
type request struct {
	user, key string
	action    string // "disable" or "enable"
	digest    string // of the normalised request, see digest
}

// recorded is what invocation_keys holds for a key.
type recorded struct {
	action, digest string
	changed        int
}

// digest returns the SHA-256 (hex) of the normalised request: the action,
// the ids without duplicates in sorted order, and the trimmed reason. Calls
// that differ only in the order or repetition of ids, or in the spaces
// around the reason, are the same request.
func digest(action string, ids []string, reason string) string {
	sorted := slices.Sorted(slices.Values(ids))
	b, _ := json.Marshal(struct {
		Action string   `json:"action"`
		IDs    []string `json:"ids"`
		Reason string   `json:"reason"`
	}{action, slices.Compact(sorted), reason})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// claim takes req's key in tx: it inserts the key's row, or takes over the
// row of an expired key, and reports claimed; the caller then executes and
// [Store.record]s the result in tx. When the key is live it returns the
// recorded row instead.
//
// On PostgreSQL a concurrent claim of the same key waits on the primary
// key's unique index until the first transaction ends: after a commit it
// finds the row (the ON CONFLICT branch also locks it, so it cannot vanish
// before it is read); after a rollback it inserts and executes itself. On
// SQLite the transactions run one at a time.
func (s *Store) claim(ctx context.Context, tx *sql.Tx, req request, now time.Time) (rec recorded, claimed bool, err error) {
	created, expires := formatTime(now), formatTime(now.Add(KeyRetention))
	var zero int
	err = tx.QueryRowContext(ctx, s.dialect.sql(`INSERT INTO invocation_keys
			(user_id, invocation_key, action, digest, changed, created_at, expires_at)
		VALUES (?, ?, ?, ?, 0, ?, ?)
		ON CONFLICT (user_id, invocation_key) DO UPDATE SET
			action = excluded.action, digest = excluded.digest, changed = 0,
			created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE invocation_keys.expires_at <= excluded.created_at
		RETURNING changed`),
		req.user, req.key, req.action, req.digest, created, expires).Scan(&zero)
	switch {
	case err == nil:
		// Claimed: delete a batch of expired keys, oldest first, skipping
		// those another transaction holds (it may be taking one over).
		_, err = tx.ExecContext(ctx, s.dialect.sql(`DELETE FROM invocation_keys WHERE (user_id, invocation_key) IN (
			SELECT user_id, invocation_key FROM invocation_keys
			WHERE expires_at <= ? ORDER BY expires_at LIMIT ?{skipLocked})`), created, pruneBatch)
		return recorded{}, err == nil, err
	case !errors.Is(err, sql.ErrNoRows):
		return recorded{}, false, err
	}
	// The key is live: its row is committed and locked by the upsert.
	err = tx.QueryRowContext(ctx, s.dialect.sql(`SELECT action, digest, changed FROM invocation_keys
		WHERE user_id = ? AND invocation_key = ?`), req.user, req.key).Scan(&rec.action, &rec.digest, &rec.changed)
	return rec, false, err
}

// record stores the result of req's execution with its claimed key.
func (s *Store) record(ctx context.Context, tx *sql.Tx, req request, changed int) error {
	_, err := tx.ExecContext(ctx, s.dialect.sql(`UPDATE invocation_keys SET changed = ?
		WHERE user_id = ? AND invocation_key = ?`), changed, req.user, req.key)
	return err
}
