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
	// MaxKeyLength is the longest idempotency key id ([Key.ID]), in bytes.
	MaxKeyLength = 128
	// KeyRetention is how long a key is remembered after the call that
	// recorded it. A later call with the key executes again.
	KeyRetention = 24 * time.Hour
	// pruneBatch bounds the expired keys one keyed call deletes.
	pruneBatch = 100
)

// Key is the idempotency key of a [Store.DisableOnce] or [Store.EnableOnce]
// call: the id a consumer chose, within that consumer's scope. Consumers
// choose their ids independently, so keys of different consumers never
// meet: a call never replays, conflicts with or waits for a key another
// consumer (or another user) used, and cannot tell whether it was used.
type Key struct {
	// Consumer names who chose ID: for an agent, its consumer key
	// ("mcp-bridge:agent"), qualified by whatever keeps two consumers of
	// that name apart (the session, when each session has its own
	// registry). It may be any text; the store keeps only its SHA-256. It
	// must not be empty when ID is set.
	Consumer string
	// ID is the id the consumer chose, such as the invocation id of a tool
	// call: at most [MaxKeyLength] bytes of UTF-8 text without NUL. Empty
	// means no key: the call executes.
	ID string
}

// check validates k; a Key without an ID is none.
func (k Key) check() error {
	if k.ID == "" {
		return nil
	}
	if err := checkID(k.ID); err != nil {
		return err
	}
	if k.Consumer == "" {
		return &InvalidError{Field: "consumer", Problem: "an idempotency key needs the consumer that chose it"}
	}
	return nil
}

// checkID validates the id of a key.
func checkID(id string) error {
	switch {
	case len(id) > MaxKeyLength:
		return &InvalidError{Field: "invocationId", Problem: "is too long"}
	case !storable(id):
		return &InvalidError{Field: "invocationId", Problem: problemText}
	}
	return nil
}

// consumerDigest is what the idempotency_keys table stores of a consumer:
// the SHA-256 (hex) of its name. Any name fits, and no name can collide
// with another's digest.
func consumerDigest(consumer string) string {
	sum := sha256.Sum256([]byte(consumer))
	return hex.EncodeToString(sum[:])
}

// request is a keyed Disable or Enable call, as recorded.
type request struct {
	user, consumer, key string // consumer is its digest
	action              string // "disable" or "enable"
	digest              string // of the normalised request, see digest
}

// recorded is what idempotency_keys holds for a key.
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
// recorded row instead. A key is (user, consumer, id): rows of other
// consumers are never read, locked or waited for.
//
// On PostgreSQL a concurrent claim of the same key waits on the primary
// key's unique index until the first transaction ends: after a commit it
// finds the row (the ON CONFLICT branch also locks it, so it cannot vanish
// before it is read); after a rollback it inserts and executes itself. On
// SQLite the transactions run one at a time.
func (s *Store) claim(ctx context.Context, tx *sql.Tx, req request, now time.Time) (rec recorded, claimed bool, err error) {
	created, expires := formatTime(now), formatTime(now.Add(KeyRetention))
	var zero int
	err = tx.QueryRowContext(ctx, s.dialect.sql(`INSERT INTO idempotency_keys
			(user_id, consumer, invocation_key, action, digest, changed, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, 0, ?, ?)
		ON CONFLICT (user_id, consumer, invocation_key) DO UPDATE SET
			action = excluded.action, digest = excluded.digest, changed = 0,
			created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE idempotency_keys.expires_at <= excluded.created_at
		RETURNING changed`),
		req.user, req.consumer, req.key, req.action, req.digest, created, expires).Scan(&zero)
	switch {
	case err == nil:
		// Claimed: delete a batch of expired keys, oldest first, skipping
		// those another transaction holds (it may be taking one over).
		_, err = tx.ExecContext(ctx, s.dialect.sql(`DELETE FROM idempotency_keys WHERE (user_id, consumer, invocation_key) IN (
			SELECT user_id, consumer, invocation_key FROM idempotency_keys
			WHERE expires_at <= ? ORDER BY expires_at LIMIT ?{skipLocked})`), created, pruneBatch)
		return recorded{}, err == nil, err
	case !errors.Is(err, sql.ErrNoRows):
		return recorded{}, false, err
	}
	// The key is live: its row is committed and locked by the upsert.
	err = tx.QueryRowContext(ctx, s.dialect.sql(`SELECT action, digest, changed FROM idempotency_keys
		WHERE user_id = ? AND consumer = ? AND invocation_key = ?`), req.user, req.consumer, req.key).Scan(&rec.action, &rec.digest, &rec.changed)
	return rec, false, err
}

// record stores the result of req's execution with its claimed key.
func (s *Store) record(ctx context.Context, tx *sql.Tx, req request, changed int) error {
	_, err := tx.ExecContext(ctx, s.dialect.sql(`UPDATE idempotency_keys SET changed = ?
		WHERE user_id = ? AND consumer = ? AND invocation_key = ?`), changed, req.user, req.consumer, req.key)
	return err
}
