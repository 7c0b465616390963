package domain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Status is the state of a device.
type Status string

// Device statuses.
const (
	StatusOnline   Status = "online"
	StatusOffline  Status = "offline"
	StatusDisabled Status = "disabled"
)

// valid reports whether s is one of the three statuses.
func (s Status) valid() bool {
	return s == StatusOnline || s == StatusOffline || s == StatusDisabled
}

// Device is one managed device.
type Device struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Site is where the device is installed ("Amsterdam").
	Site string `json:"site"`
	// UpdatedAt is when the device's record last changed.
	UpdatedAt time.Time `json:"updatedAt"`
}

// Limits of the arguments of the store's operations.
const (
	// MaxIDs is the most device ids one Disable or Enable call takes.
	MaxIDs = 100
	// MaxIDLength is the longest device id, in bytes.
	MaxIDLength = 64
	// MaxReasonLength is the longest reason, in characters.
	MaxReasonLength = 500
	// MaxQueryLength is the longest Filter.Query or Filter.Site, in
	// characters.
	MaxQueryLength = 100
)

// Filter selects devices for [Store.List]. Zero fields select everything.
type Filter struct {
	// Status, if set, selects devices with this status.
	Status Status
	// Site, if set, selects devices at this site (case-insensitive).
	Site string
	// Query, if set, selects devices whose name or id contains it
	// (case-insensitive).
	Query string
}

// Case-insensitive means ASCII letters match either case; other characters
// match only themselves, on both backends. Site and Query must be valid
// UTF-8 without NUL.

// problemText is the problem of a text argument that is not valid UTF-8 or
// holds NUL, which PostgreSQL cannot store.
const problemText = "must be valid UTF-8 text without NUL characters"

// validate checks the filter.
func (f Filter) validate() error {
	switch {
	case f.Status != "" && !f.Status.valid():
		return &InvalidError{Field: "status", Problem: "must be online, offline or disabled"}
	case utf8.RuneCountInString(f.Site) > MaxQueryLength:
		return &InvalidError{Field: "site", Problem: "is too long"}
	case !storable(f.Site):
		return &InvalidError{Field: "site", Problem: problemText}
	case utf8.RuneCountInString(f.Query) > MaxQueryLength:
		return &InvalidError{Field: "query", Problem: "is too long"}
	case !storable(f.Query):
		return &InvalidError{Field: "query", Problem: problemText}
	}
	return nil
}

// List returns the devices matching f, ordered by name. It needs
// PermRead (viewer and up).
func (s *Store) List(ctx context.Context, u User, f Filter) ([]Device, error) {
	v, err := s.browse(ctx, u, f, false)
	return v.Devices, err
}

// View is what [Store.Browse] reads.
type View struct {
	// Devices are the devices matching the filter, ordered by name.
	Devices []Device
	// Sites are the sites of all devices, sorted, each once.
	Sites []string
}

// Browse returns the devices matching f, as [Store.List] does, and the
// sites of all devices, in one read: what a page showing a filtered list
// with a site picker needs. It needs PermRead (viewer and up).
func (s *Store) Browse(ctx context.Context, u User, f Filter) (View, error) {
	return s.browse(ctx, u, f, true)
}

// browse is one query: all devices when the sites are wanted (a column
// says which match f), else only those that match.
func (s *Store) browse(ctx context.Context, u User, f Filter, sites bool) (View, error) {
	if !u.Can(PermRead) {
		return View{}, forbidden(u, PermRead)
	}
	if err := f.validate(); err != nil {
		return View{}, err
	}
	var cond strings.Builder
	cond.WriteString(`TRUE`)
	var args []any
	if f.Status != "" {
		cond.WriteString(` AND status = ?`)
		args = append(args, string(f.Status))
	}
	if f.Site != "" {
		cond.WriteString(` AND lower(site) = ?`)
		args = append(args, foldASCII(f.Site))
	}
	if f.Query != "" {
		cond.WriteString(` AND (lower(name) LIKE ? ESCAPE '\' OR lower(id) LIKE ? ESCAPE '\')`)
		pattern := "%" + escapeLike(foldASCII(f.Query)) + "%"
		args = append(args, pattern, pattern)
	}
	// The text columns compare byte by byte on both backends ({text}), so
	// the order is the same.
	q := `SELECT id, name, status, site, updated_at, ` + cond.String() + ` FROM devices ORDER BY lower(name), id`
	if !sites {
		q = `SELECT id, name, status, site, updated_at, TRUE FROM devices WHERE ` + cond.String() + ` ORDER BY lower(name), id`
	}
	rows, err := s.db.QueryContext(ctx, s.dialect.sql(q), args...)
	if err != nil {
		return View{}, fmt.Errorf("domain: list devices: %w", err)
	}
	defer rows.Close()
	v := View{Devices: []Device{}}
	for rows.Next() {
		var d Device
		var status, at string
		var match bool
		if err := rows.Scan(&d.ID, &d.Name, &status, &d.Site, &at, &match); err != nil {
			return View{}, fmt.Errorf("domain: list devices: %w", err)
		}
		d.Status = Status(status)
		if d.UpdatedAt, err = parseTime(at); err != nil {
			return View{}, fmt.Errorf("domain: list devices: %w", err)
		}
		if match {
			v.Devices = append(v.Devices, d)
		}
		if sites && !slices.Contains(v.Sites, d.Site) {
			v.Sites = append(v.Sites, d.Site)
		}
	}
	if err := rows.Err(); err != nil {
		return View{}, fmt.Errorf("domain: list devices: %w", err)
	}
	slices.Sort(v.Sites)
	return v, nil
}

// escapeLike escapes the LIKE wildcards of s with '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// Get returns one device. It needs PermRead (viewer and up); an unknown
// id is a [*NotFoundError].
func (s *Store) Get(ctx context.Context, u User, id string) (Device, error) {
	if !u.Can(PermRead) {
		return Device{}, forbidden(u, PermRead)
	}
	if !storable(id) {
		return Device{}, &NotFoundError{IDs: []string{id}}
	}
	row := s.db.QueryRowContext(ctx, s.dialect.sql(`SELECT id, name, status, site, updated_at FROM devices WHERE id = ?`), id)
	d, err := scanDevice(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Device{}, &NotFoundError{IDs: []string{id}}
	}
	if err != nil {
		return Device{}, fmt.Errorf("domain: get device: %w", err)
	}
	return d, nil
}

// scanDevice reads a device from a row of (id, name, status, site,
// updated_at).
func scanDevice(row interface{ Scan(...any) error }) (Device, error) {
	var d Device
	var status, at string
	if err := row.Scan(&d.ID, &d.Name, &status, &d.Site, &at); err != nil {
		return Device{}, err
	}
	d.Status = Status(status)
	t, err := parseTime(at)
	if err != nil {
		return Device{}, err
	}
	d.UpdatedAt = t
	return d, nil
}

// DisableResult is the outcome of [Store.Disable] and [Store.DisableOnce].
type DisableResult struct {
	// Disabled counts the devices that were disabled by the call; devices
	// that were already disabled are not counted.
	Disabled int
	// Replayed reports that the call executed nothing: it is the result
	// recorded for an earlier call with the same idempotency key.
	Replayed bool
}

// EnableResult is the outcome of [Store.Enable] and [Store.EnableOnce].
type EnableResult struct {
	// Enabled counts the devices that were enabled by the call; devices
	// that were not disabled are not counted.
	Enabled int
	// Replayed reports that the call executed nothing: it is the result
	// recorded for an earlier call with the same idempotency key.
	Replayed bool
}

// Disable disables the devices ids, giving reason, as u. It needs
// PermDisable (operator and admin).
//
// It is all-or-nothing: in one transaction it checks that every id exists
// (else a [*NotFoundError] and nothing changes), sets the status of those
// not yet disabled to "disabled" and writes one audit_log row per changed
// device with u.ID, the time and the reason. ids must hold 1 to [MaxIDs]
// ids (duplicates count once) and reason must not be blank, else an
// [*InvalidError]. It is [Store.DisableOnce] without a key: every call
// executes.
func (s *Store) Disable(ctx context.Context, u User, ids []string, reason string) (DisableResult, error) {
	return s.DisableOnce(ctx, u, Key{}, ids, reason)
}

// DisableOnce is [Store.Disable] with an idempotency key: of the calls of
// user u with the same key (the same consumer and id) within
// [KeyRetention], one executes and the others return its recorded result
// (Replayed set), even when they run at the same time on different Stores
// sharing the database. The key used again by its consumer for a
// different request (another action, other ids, another reason) is a
// [*KeyReusedError] and changes nothing. The same id chosen by another
// consumer, or by the same consumer for another user, is another key: it
// executes as if the first had never been used. A zero key.ID means no
// deduplication; an id longer than [MaxKeyLength] bytes, or not valid
// UTF-8 without NUL, is an [*InvalidError] for field "invocationId", and
// an id without a consumer one for field "consumer". See the package
// documentation, "Idempotency".
func (s *Store) DisableOnce(ctx context.Context, u User, key Key, ids []string, reason string) (DisableResult, error) {
	n, replayed, err := s.transition(ctx, u, PermDisable, key, ids, reason)
	return DisableResult{Disabled: n, Replayed: replayed}, err
}

// Enable enables the disabled devices among ids, giving reason, as u. It
// needs PermEnable (operator and admin). An enabled device is "offline"
// until it next reports in. It is all-or-nothing and validated as
// [Store.Disable] is, and writes one audit_log row per changed device. It
// is [Store.EnableOnce] without a key.
func (s *Store) Enable(ctx context.Context, u User, ids []string, reason string) (EnableResult, error) {
	return s.EnableOnce(ctx, u, Key{}, ids, reason)
}

// EnableOnce is [Store.Enable] with an idempotency key, deduplicated as
// [Store.DisableOnce] is; a key the same consumer already used for a
// disable is a [*KeyReusedError].
func (s *Store) EnableOnce(ctx context.Context, u User, key Key, ids []string, reason string) (EnableResult, error) {
	n, replayed, err := s.transition(ctx, u, PermEnable, key, ids, reason)
	return EnableResult{Enabled: n, Replayed: replayed}, err
}

// transition performs Disable (perm PermDisable) or Enable (PermEnable)
// with idempotency key key (the zero Key for none) and returns how many devices
// changed, and whether that is the recorded result of an earlier call.
func (s *Store) transition(ctx context.Context, u User, perm Permission, key Key, ids []string, reason string) (changed int, replayed bool, err error) {
	// Authority first: a caller without it learns nothing about ids.
	if !u.Can(perm) {
		return 0, false, forbidden(u, perm)
	}
	ids, reason, err = checkTransition(ids, reason)
	if err != nil {
		return 0, false, err
	}
	if err := key.check(); err != nil {
		return 0, false, err
	}
	action, to := "disable", StatusDisabled
	if perm == PermEnable {
		action, to = "enable", StatusOffline
	}
	fail := func(err error) (int, bool, error) {
		return 0, false, fmt.Errorf("domain: %s devices: %w", action, err)
	}

	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: see dsnParams
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()

	now := s.now()
	var req request
	if key.ID != "" {
		req = request{user: u.ID, consumer: consumerDigest(key.Consumer), key: key.ID, action: action, digest: digest(action, ids, reason)}
		rec, claimed, err := s.claim(ctx, tx, req, now)
		if err != nil {
			return fail(err)
		}
		if !claimed {
			if rec.action != req.action || rec.digest != req.digest {
				return 0, false, &KeyReusedError{Key: key}
			}
			return rec.changed, true, nil // nothing to commit
		}
	}

	current, err := s.statuses(ctx, tx, ids)
	if err != nil {
		return fail(err)
	}
	var missing []string
	for _, id := range ids {
		if _, ok := current[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return 0, false, &NotFoundError{IDs: missing} // the claim rolls back
	}

	at := formatTime(now)
	for _, id := range ids {
		from := current[id]
		if (perm == PermDisable && from == StatusDisabled) || (perm == PermEnable && from != StatusDisabled) {
			continue
		}
		if _, err := tx.ExecContext(ctx, s.dialect.sql(`UPDATE devices SET status = ?, updated_at = ? WHERE id = ?`), string(to), at, id); err != nil {
			return fail(err)
		}
		if _, err := tx.ExecContext(ctx, s.dialect.sql(
			`INSERT INTO audit_log (at, user_id, action, device_id, from_status, to_status, reason) VALUES (?, ?, ?, ?, ?, ?, ?)`),
			at, u.ID, action, id, string(from), string(to), reason); err != nil {
			return fail(err)
		}
		changed++
	}
	if key.ID != "" {
		if err := s.record(ctx, tx, req, changed); err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return changed, false, nil
}

// checkTransition validates the arguments of Disable and Enable and
// returns the ids without duplicates and the trimmed reason.
func checkTransition(ids []string, reason string) ([]string, string, error) {
	if len(ids) == 0 {
		return nil, "", &InvalidError{Field: "ids", Problem: "select at least one device"}
	}
	if len(ids) > MaxIDs {
		return nil, "", &InvalidError{Field: "ids", Problem: fmt.Sprintf("at most %d devices at a time", MaxIDs)}
	}
	seen := make(map[string]bool, len(ids))
	unique := make([]string, 0, len(ids))
	for _, id := range ids {
		if id == "" || len(id) > MaxIDLength {
			return nil, "", &InvalidError{Field: "ids", Problem: "a device id is empty or too long"}
		}
		if !storable(id) {
			return nil, "", &InvalidError{Field: "ids", Problem: "a device id " + problemText}
		}
		if !seen[id] {
			seen[id] = true
			unique = append(unique, id)
		}
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, "", &InvalidError{Field: "reason", Problem: "give a reason"}
	}
	if utf8.RuneCountInString(reason) > MaxReasonLength {
		return nil, "", &InvalidError{Field: "reason", Problem: fmt.Sprintf("at most %d characters", MaxReasonLength)}
	}
	if !storable(reason) {
		return nil, "", &InvalidError{Field: "reason", Problem: problemText}
	}
	return unique, reason, nil
}

// statuses returns the status of each existing device among ids, and
// locks their rows until tx ends. The rows are locked in id order, the same
// in every transaction, so that transactions with overlapping ids wait for
// each other instead of deadlocking.
func (s *Store) statuses(ctx context.Context, tx *sql.Tx, ids []string) (map[string]Status, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	q := `SELECT id, status FROM devices WHERE id IN (` + placeholders(len(ids)) + `) ORDER BY id{forUpdate}`
	rows, err := tx.QueryContext(ctx, s.dialect.sql(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]Status, len(ids))
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return nil, err
		}
		out[id] = Status(status)
	}
	return out, rows.Err()
}

// Change is one row of the audit log: a status change of one device.
type Change struct {
	At     time.Time `json:"at"`
	UserID string    `json:"userId"`
	// Action is "disable" or "enable".
	Action   string `json:"action"`
	DeviceID string `json:"deviceId"`
	From     Status `json:"from"`
	To       Status `json:"to"`
	Reason   string `json:"reason"`
}

// History returns the most recent status changes of device id, newest
// first, at most limit of them (all when limit ≤ 0). It needs PermRead
// (viewer and up); an unknown id has no history.
func (s *Store) History(ctx context.Context, u User, id string, limit int) ([]Change, error) {
	if !u.Can(PermRead) {
		return nil, forbidden(u, PermRead)
	}
	if !storable(id) {
		return []Change{}, nil
	}
	if limit <= 0 {
		limit = math.MaxInt64 // no limit, on both backends
	}
	rows, err := s.db.QueryContext(ctx, s.dialect.sql(`SELECT at, user_id, action, device_id, from_status, to_status, reason
		FROM audit_log WHERE device_id = ? ORDER BY id DESC LIMIT ?`), id, int64(limit))
	if err != nil {
		return nil, fmt.Errorf("domain: history: %w", err)
	}
	defer rows.Close()
	changes := []Change{}
	for rows.Next() {
		var c Change
		var at, from, to string
		if err := rows.Scan(&at, &c.UserID, &c.Action, &c.DeviceID, &from, &to, &c.Reason); err != nil {
			return nil, fmt.Errorf("domain: history: %w", err)
		}
		if c.At, err = parseTime(at); err != nil {
			return nil, err
		}
		c.From, c.To = Status(from), Status(to)
		changes = append(changes, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("domain: history: %w", err)
	}
	return changes, nil
}
