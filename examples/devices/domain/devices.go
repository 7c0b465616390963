package domain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

// validate checks the filter.
func (f Filter) validate() error {
	switch {
	case f.Status != "" && !f.Status.valid():
		return &InvalidError{Field: "status", Problem: "must be online, offline or disabled"}
	case utf8.RuneCountInString(f.Site) > MaxQueryLength:
		return &InvalidError{Field: "site", Problem: "is too long"}
	case utf8.RuneCountInString(f.Query) > MaxQueryLength:
		return &InvalidError{Field: "query", Problem: "is too long"}
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
	cond.WriteString(`1 = 1`)
	var args []any
	if f.Status != "" {
		cond.WriteString(` AND status = ?`)
		args = append(args, string(f.Status))
	}
	if f.Site != "" {
		cond.WriteString(` AND site = ? COLLATE NOCASE`)
		args = append(args, f.Site)
	}
	if f.Query != "" {
		cond.WriteString(` AND (name LIKE ? ESCAPE '\' OR id LIKE ? ESCAPE '\')`)
		pattern := "%" + escapeLike(f.Query) + "%"
		args = append(args, pattern, pattern)
	}
	q := `SELECT id, name, status, site, updated_at, ` + cond.String() + ` FROM devices ORDER BY name COLLATE NOCASE, id`
	if !sites {
		q = `SELECT id, name, status, site, updated_at, 1 FROM devices WHERE ` + cond.String() + ` ORDER BY name COLLATE NOCASE, id`
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
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
	row := s.db.QueryRowContext(ctx, `SELECT id, name, status, site, updated_at FROM devices WHERE id = ?`, id)
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

// DisableResult is the outcome of [Store.Disable].
type DisableResult struct {
	// Disabled counts the devices that were disabled by the call; devices
	// that were already disabled are not counted.
	Disabled int
}

// EnableResult is the outcome of [Store.Enable].
type EnableResult struct {
	// Enabled counts the devices that were enabled by the call; devices
	// that were not disabled are not counted.
	Enabled int
}

// Disable disables the devices ids, giving reason, as u. It needs
// PermDisable (operator and admin).
//
// It is all-or-nothing: in one transaction it checks that every id exists
// (else a [*NotFoundError] and nothing changes), sets the status of those
// not yet disabled to "disabled" and writes one audit_log row per changed
// device with u.ID, the time and the reason. ids must hold 1 to [MaxIDs]
// ids (duplicates count once) and reason must not be blank, else an
// [*InvalidError].
func (s *Store) Disable(ctx context.Context, u User, ids []string, reason string) (DisableResult, error) {
	n, err := s.transition(ctx, u, PermDisable, ids, reason)
	return DisableResult{Disabled: n}, err
}

// Enable enables the disabled devices among ids, giving reason, as u. It
// needs PermEnable (operator and admin). An enabled device is "offline"
// until it next reports in. It is all-or-nothing and validated as
// [Store.Disable] is, and writes one audit_log row per changed device.
func (s *Store) Enable(ctx context.Context, u User, ids []string, reason string) (EnableResult, error) {
	n, err := s.transition(ctx, u, PermEnable, ids, reason)
	return EnableResult{Enabled: n}, err
}

// transition performs Disable (perm PermDisable) or Enable (PermEnable)
// and returns how many devices changed.
func (s *Store) transition(ctx context.Context, u User, perm Permission, ids []string, reason string) (int, error) {
	// Authority first: a caller without it learns nothing about ids.
	if !u.Can(perm) {
		return 0, forbidden(u, perm)
	}
	ids, reason, err := checkTransition(ids, reason)
	if err != nil {
		return 0, err
	}
	action, to := "disable", StatusDisabled
	if perm == PermEnable {
		action, to = "enable", StatusOffline
	}

	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: see dsnParams
	if err != nil {
		return 0, fmt.Errorf("domain: %s devices: %w", action, err)
	}
	defer tx.Rollback()

	current, err := statuses(ctx, tx, ids)
	if err != nil {
		return 0, fmt.Errorf("domain: %s devices: %w", action, err)
	}
	var missing []string
	for _, id := range ids {
		if _, ok := current[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return 0, &NotFoundError{IDs: missing}
	}

	at := formatTime(s.now())
	changed := 0
	for _, id := range ids {
		from := current[id]
		if (perm == PermDisable && from == StatusDisabled) || (perm == PermEnable && from != StatusDisabled) {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE devices SET status = ?, updated_at = ? WHERE id = ?`, string(to), at, id); err != nil {
			return 0, fmt.Errorf("domain: %s devices: %w", action, err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO audit_log (at, user_id, action, device_id, from_status, to_status, reason) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			at, u.ID, action, id, string(from), string(to), reason); err != nil {
			return 0, fmt.Errorf("domain: %s devices: %w", action, err)
		}
		changed++
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("domain: %s devices: %w", action, err)
	}
	return changed, nil
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
	return unique, reason, nil
}

// statuses returns the status of each existing device among ids.
func statuses(ctx context.Context, tx *sql.Tx, ids []string) (map[string]Status, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	rows, err := tx.QueryContext(ctx, `SELECT id, status FROM devices WHERE id IN (`+marks+`)`, args...)
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
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.db.QueryContext(ctx, `SELECT at, user_id, action, device_id, from_status, to_status, reason
		FROM audit_log WHERE device_id = ? ORDER BY id DESC LIMIT ?`, id, limit)
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
