package domain_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// session is the host side of one user session: who is signed in.
type session struct {
	mu   sync.Mutex
	user *domain.User
}

func (s *session) signIn(u domain.User) { s.mu.Lock(); s.user = &u; s.mu.Unlock() }
func (s *session) signOut()             { s.mu.Lock(); s.user = nil; s.mu.Unlock() }

// context is the registry's host context provider.
func (s *session) context() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.user == nil {
		return map[string]any{}
	}
	return map[string]any{"user": *s.user}
}

// selection is the live selection of the devices table.
type selection struct {
	mu  sync.Mutex
	ids []string
}

func (s *selection) set(ids ...string) { s.mu.Lock(); s.ids = slices.Clone(ids); s.mu.Unlock() }

func (s *selection) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

func (s *selection) bind(context.Context) (map[string]any, error) {
	return map[string]any{"ids": s.get()}, nil
}

func (s *selection) describe() string { return fmt.Sprintf("%d devices selected", len(s.get())) }

// env is the example wired end to end: the SQLite store, its executor, a
// registry whose host context is the session, and the devices table.
type env struct {
	store   *domain.Store
	db      *sql.DB
	reg     *surface.Registry
	session *session
	sel     *selection
}

// newEnv mounts the devices table with the given component policies,
// signed in as user.
func newEnv(t *testing.T, user domain.User, policies ...surface.Policy) *env {
	t.Helper()
	store, db := openSeeded(t)
	e := &env{store: store, db: db, session: &session{}, sel: &selection{}}
	e.session.signIn(user)
	e.reg = surfacetest.NewRegistry(t, &surface.Options{Context: e.session.context})
	e.reg.SetProcedureExecutor(domain.Procedures(store, nil))
	surfacetest.MustRegister(t, e.reg, surface.Component{
		Type:        "devices.table",
		InstanceID:  "main",
		Description: "The devices table: the devices matching the filters, with a multi-row selection.",
		Policies:    policies,
		Observations: map[string]surface.Capability{
			"selection": surface.Observation(surface.ObservationDef[[]string]{
				Description: "The ids of the selected devices.",
				Read:        func(context.Context, *surface.Call) ([]string, error) { return e.sel.get(), nil },
			}),
		},
		Procedures: []surface.Capability{domain.DisableRef(e.sel.bind, e.sel.describe), domain.ListRef()},
	})
	return e
}

// invoke calls a capability as the test agent.
func (e *env) invoke(invocationID, capabilityID, input, confirmationID string) surface.Result {
	inv := surface.Invocation{InvocationID: invocationID, CapabilityID: capabilityID, ConfirmationID: confirmationID}
	if input != "" {
		inv.Input = json.RawMessage(input)
	}
	return e.reg.Invoke(context.Background(), inv, surface.InvokeOptions{Consumer: surfacetest.Consumer()})
}

// requestApproved asks to disable the selection with reason, checks that
// the user is asked to approve exactly the bound ids, approves, and
// returns the invocation id and confirmation id for the retry.
func (e *env) requestApproved(t *testing.T, reason string) (invocationID, confirmationID string) {
	t.Helper()
	want := e.sel.get()
	res := e.invoke("", domain.DisableID, fmt.Sprintf(`{"reason":%q}`, reason), "")
	cerr := surfacetest.RequireCode(t, res, surface.CodeConfirmationRequired)
	confirmationID, _ = cerr.Details["confirmationId"].(string)
	if confirmationID == "" || cerr.Details["effect"] != string(surface.EffectDestructive) {
		t.Fatalf("confirmation details %+v", cerr.Details)
	}
	pending := e.reg.Confirmations().Pending()
	if len(pending) != 1 || pending[0].ConfirmationID != confirmationID {
		t.Fatalf("pending %+v", pending)
	}
	wantInput, _ := json.Marshal(map[string]any{"ids": want, "reason": reason})
	if string(pending[0].Input) != string(wantInput) || pending[0].Effect != surface.EffectDestructive {
		t.Fatalf("the user is asked to approve %s, want %s", pending[0].Input, wantInput)
	}
	if !e.reg.Confirmations().Resolve(confirmationID, surface.Resolution{Approved: true}) {
		t.Fatal("Resolve failed")
	}
	return res.InvocationID, confirmationID
}

// AS-EXAMPLE-001 (domain half)
//
// The devices table binds its live selection to the ids of
// domain:devices.disable; the domain service on SQLite re-checks the
// user's authority on every call and the database shows exactly what was
// approved.
func TestDevicesEndToEnd(t *testing.T) {
	t.Run("discovery", func(t *testing.T) {
		e := newEnv(t, operator)
		e.sel.set("d1", "d2")
		var disable *surface.ProcedureDescriptor
		snap := e.reg.Snapshot(surface.SnapshotOptions{})
		for i := range snap.Procedures {
			if snap.Procedures[i].ProcedureID == domain.DisableID {
				disable = &snap.Procedures[i]
			}
		}
		if disable == nil {
			t.Fatalf("no %s in %+v", domain.DisableID, snap.Procedures)
		}
		if strings.Contains(string(disable.InputSchema), `"ids"`) || !strings.Contains(string(disable.InputSchema), `"reason"`) {
			t.Fatalf("the agent's schema shows the locked ids: %s", disable.InputSchema)
		}
		if len(disable.BoundFields) != 1 || disable.BoundFields[0] != (surface.BoundField{Path: "ids", Locked: true, Source: "ui-state"}) {
			t.Fatalf("bound fields %+v", disable.BoundFields)
		}
		if disable.Effect != surface.EffectDestructive || disable.Confirmation != surface.ConfirmRequired || !disable.Available ||
			disable.ContextualNote != "2 devices selected" {
			t.Fatalf("%+v", disable)
		}
		// Nothing selected: the reference is visible but unavailable.
		e.sel.set()
		for _, p := range e.reg.Snapshot(surface.SnapshotOptions{}).Procedures {
			if p.ProcedureID == domain.DisableID && (p.Available || p.UnavailableReason != domain.NothingSelected) {
				t.Fatalf("%+v", p)
			}
		}
		surfacetest.RequireCode(t, e.invoke("", domain.DisableID, `{"reason":"maintenance"}`, ""), surface.CodeCapabilityNotAvailable)
		if n := len(e.reg.Confirmations().Pending()); n != 0 {
			t.Fatalf("%d confirmations for an empty selection", n)
		}
	})

	t.Run("approved", func(t *testing.T) {
		e := newEnv(t, operator)
		before := statusOf(t, e.db)
		e.sel.set("d1", "d2")
		invID, cnfID := e.requestApproved(t, "maintenance")
		if s := statusOf(t, e.db); s["d1"] != "online" || s["d2"] != "online" || len(auditLog(t, e.db)) != 0 {
			t.Fatal("executed before the retry with evidence")
		}
		res := e.invoke(invID, domain.DisableID, `{"reason":"maintenance"}`, cnfID)
		surfacetest.RequireOK(t, res)
		if res.Output != `{"disabled":2}` {
			t.Fatalf("output %s", res.Output)
		}
		after := statusOf(t, e.db)
		for id, was := range before {
			want := was
			if id == "d1" || id == "d2" {
				want = "disabled"
			}
			if after[id] != want {
				t.Errorf("%s is %s, want %s", id, after[id], want)
			}
		}
		log := auditLog(t, e.db)
		if len(log) != 2 {
			t.Fatalf("audit %+v", log)
		}
		for i, id := range []string{"d1", "d2"} {
			if r := log[i]; r.User != operator.ID || r.Action != "disable" || r.Device != id || r.Reason != "maintenance" || r.From != "online" {
				t.Errorf("audit row %d: %+v", i, r)
			}
		}
		// A replay of the same invocation is answered from the cache: the
		// domain does not run twice.
		replay := e.invoke(invID, domain.DisableID, `{"reason":"maintenance"}`, cnfID)
		surfacetest.RequireOK(t, replay)
		if replay.Output != `{"disabled":2}` || len(auditLog(t, e.db)) != 2 {
			t.Fatalf("replay %+v, %d audit rows", replay, len(auditLog(t, e.db)))
		}
	})

	t.Run("bait-and-switch", func(t *testing.T) {
		e := newEnv(t, operator)
		before := stateOf(t, e.db)
		e.sel.set("d3")
		invID, cnfID := e.requestApproved(t, "maintenance")
		e.sel.set("d3", "d4") // the selection changes after the approval
		cerr := surfacetest.RequireCode(t, e.invoke(invID, domain.DisableID, `{"reason":"maintenance"}`, cnfID), surface.CodeConfirmationInvalid)
		if cerr.Details["reason"] != "mismatch" {
			t.Fatalf("%+v", cerr)
		}
		after := stateOf(t, e.db)
		if after.status["d3"] != "online" || after.status["d4"] != "offline" {
			t.Fatalf("d3 %s, d4 %s", after.status["d3"], after.status["d4"])
		}
		requireUnchanged(t, before, after)
	})

	t.Run("locked-field", func(t *testing.T) {
		e := newEnv(t, operator)
		before := stateOf(t, e.db)
		e.sel.set("d5")
		cerr := surfacetest.RequireCode(t, e.invoke("", domain.DisableID, `{"reason":"maintenance","ids":["d6"]}`, ""), surface.CodeInvalidInput)
		if lf, _ := cerr.Details["lockedFields"].([]string); !slices.Equal(lf, []string{"ids"}) {
			t.Fatalf("%+v", cerr)
		}
		if n := len(e.reg.Confirmations().Pending()); n != 0 {
			t.Fatalf("%d confirmations for a rejected input", n)
		}
		requireUnchanged(t, before, stateOf(t, e.db))
	})

	t.Run("viewer-refused-by-domain", func(t *testing.T) {
		// The component's client-side policy is misconfigured to allow
		// everything; the domain side still refuses.
		allowAll := surface.HasPermission(string(domain.PermDisable), func(map[string]any, string) bool { return true })
		e := newEnv(t, viewer, allowAll)
		before := stateOf(t, e.db)
		e.sel.set("d7", "d8")
		invID, cnfID := e.requestApproved(t, "maintenance")
		cerr := surfacetest.RequireCode(t, e.invoke(invID, domain.DisableID, `{"reason":"maintenance"}`, cnfID), surface.CodeNotAuthorized)
		if cerr.Details["origin"] != "server" {
			t.Fatalf("%+v", cerr)
		}
		requireUnchanged(t, before, stateOf(t, e.db))
	})

	t.Run("signed-out", func(t *testing.T) {
		e := newEnv(t, operator)
		before := stateOf(t, e.db)
		e.sel.set("d1")
		invID, cnfID := e.requestApproved(t, "maintenance")
		e.session.signOut()
		surfacetest.RequireCode(t, e.invoke(invID, domain.DisableID, `{"reason":"maintenance"}`, cnfID), surface.CodeNotAuthenticated)
		requireUnchanged(t, before, stateOf(t, e.db))
	})

	t.Run("unknown-id-all-or-nothing", func(t *testing.T) {
		e := newEnv(t, operator)
		before := stateOf(t, e.db)
		e.sel.set("d5", "d404") // a stale selection: d404 was deleted meanwhile
		invID, cnfID := e.requestApproved(t, "maintenance")
		res := e.invoke(invID, domain.DisableID, `{"reason":"maintenance"}`, cnfID)
		cerr := surfacetest.RequireCode(t, res, surface.CodeInvalidInput)
		issues, _ := cerr.Details["issues"].([]surface.Issue)
		if len(issues) != 1 || issues[0] != (surface.Issue{Path: "ids[1]", Message: "unknown device id"}) {
			t.Fatalf("%+v", cerr)
		}
		if b, _ := json.Marshal(res.Error); strings.Contains(string(b), "d404") || strings.Contains(string(b), "domain") {
			t.Fatalf("the error echoes internals: %s", b)
		}
		requireUnchanged(t, before, stateOf(t, e.db))
	})

	t.Run("blank-reason-rejected-before-approval", func(t *testing.T) {
		e := newEnv(t, operator)
		e.sel.set("d1")
		surfacetest.RequireCode(t, e.invoke("", domain.DisableID, `{"reason":"   "}`, ""), surface.CodeInvalidInput)
		if n := len(e.reg.Confirmations().Pending()); n != 0 {
			t.Fatalf("%d confirmations for a blank reason", n)
		}
	})

	t.Run("list", func(t *testing.T) {
		e := newEnv(t, viewer)
		res := e.invoke("", domain.ListID, `{"status":"offline"}`, "")
		surfacetest.RequireOK(t, res)
		var out domain.ListOutput
		if err := json.Unmarshal([]byte(res.Output), &out); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(out.Devices), []string{"d9", "d4", "d6", "d10"}) {
			t.Fatalf("%s", res.Output)
		}
		surfacetest.RequireCode(t, e.invoke("", domain.ListID, `{"status":"broken"}`, ""), surface.CodeInvalidInput)
		e.session.signIn(nobody)
		if cerr := surfacetest.RequireCode(t, e.invoke("", domain.ListID, `{}`, ""), surface.CodeNotAuthorized); cerr.Details["origin"] != "server" {
			t.Fatalf("%+v", cerr)
		}
	})
}
