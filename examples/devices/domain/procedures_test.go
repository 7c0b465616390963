package domain_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

func TestProceduresManifest(t *testing.T) {
	store, _ := openSeeded(t)
	if got := domain.Procedures(store, nil).Paths(); !slices.Equal(got, []string{"devices.disable", "devices.enable", "devices.list"}) {
		t.Fatal(got)
	}
}

// execute calls the executor directly, as the registry would, with a new
// invocation id.
func execute(t *testing.T, x surface.ProcedureExecutor, path string, host map[string]any, input string) (json.RawMessage, error) {
	t.Helper()
	return executeID(t, x, path, host, input, "inv_"+rand.Text())
}

// executeID is execute with the invocation id id.
func executeID(t *testing.T, x surface.ProcedureExecutor, path string, host map[string]any, input, id string) (json.RawMessage, error) {
	t.Helper()
	return x.Execute(context.Background(), &surface.ProcedureCall{
		ProcedureID: "domain:" + path, Path: path, Input: json.RawMessage(input), InvocationID: id,
		Consumer: surfacetest.Consumer(), Host: host,
		// Evidence is information, never authority.
		Confirmation: &surface.Evidence{},
	})
}

func requireAgentError(t *testing.T, err error, code surface.Code) *surface.Error {
	t.Helper()
	var e *surface.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	return e
}

func TestProceduresErrorMapping(t *testing.T) {
	store, db := openSeeded(t)
	before := stateOf(t, db)
	x := domain.Procedures(store, nil)
	as := func(u domain.User) map[string]any { return map[string]any{"user": u} }

	for _, host := range []map[string]any{nil, {}, {"user": "olivia"}, {"user": domain.User{Roles: []string{"admin"}}}} {
		_, err := execute(t, x, domain.DisablePath, host, `{"ids":["d1"],"reason":"r"}`)
		requireAgentError(t, err, surface.CodeNotAuthenticated)
		_, err = execute(t, x, domain.ListPath, host, `{}`)
		requireAgentError(t, err, surface.CodeNotAuthenticated)
	}
	_, err := execute(t, x, domain.DisablePath, as(viewer), `{"ids":["d1"],"reason":"r"}`)
	if e := requireAgentError(t, err, surface.CodeNotAuthorized); !reflect.DeepEqual(e.Details, map[string]any{"origin": "server"}) {
		t.Fatalf("%+v", e)
	}
	_, err = execute(t, x, domain.DisablePath, as(operator), `{"ids":["d404","d1","d405"],"reason":"r"}`)
	e := requireAgentError(t, err, surface.CodeInvalidInput)
	want := []surface.Issue{{Path: "ids[0]", Message: "unknown device id"}, {Path: "ids[2]", Message: "unknown device id"}}
	if issues, _ := e.Details["issues"].([]surface.Issue); !slices.Equal(issues, want) || strings.Contains(e.Message, "d40") {
		t.Fatalf("%+v", e)
	}
	_, err = execute(t, x, domain.DisablePath, as(operator), `{"ids":["d1"],"reason":" "}`)
	e = requireAgentError(t, err, surface.CodeInvalidInput)
	if issues, _ := e.Details["issues"].([]surface.Issue); len(issues) != 1 || issues[0].Path != "reason" {
		t.Fatalf("%+v", e)
	}
	_, err = execute(t, x, domain.ListPath, as(viewer), `{"status":"broken"}`)
	e = requireAgentError(t, err, surface.CodeInvalidInput)
	if issues, _ := e.Details["issues"].([]surface.Issue); len(issues) != 1 || issues[0].Path != "status" {
		t.Fatalf("%+v", e)
	}
	requireUnchanged(t, before, stateOf(t, db))

	out, err := execute(t, x, domain.DisablePath, as(admin), `{"ids":["d1","d2"],"reason":"r"}`)
	if err != nil || string(out) != `{"disabled":2}` {
		t.Fatalf("%s %v", out, err)
	}
	if log := auditLog(t, db); len(log) != 2 || log[0].User != admin.ID {
		t.Fatalf("%+v", log)
	}

	// Enable is refused to viewers by the store, and counts what changed.
	_, err = execute(t, x, domain.EnablePath, as(viewer), `{"ids":["d1"],"reason":"r"}`)
	if e := requireAgentError(t, err, surface.CodeNotAuthorized); !reflect.DeepEqual(e.Details, map[string]any{"origin": "server"}) {
		t.Fatalf("%+v", e)
	}
	_, err = execute(t, x, domain.EnablePath, nil, `{"ids":["d1"],"reason":"r"}`)
	requireAgentError(t, err, surface.CodeNotAuthenticated)
	_, err = execute(t, x, domain.EnablePath, as(operator), `{"ids":["d1","d404"],"reason":"r"}`)
	e = requireAgentError(t, err, surface.CodeInvalidInput)
	if issues, _ := e.Details["issues"].([]surface.Issue); len(issues) != 1 || issues[0].Path != "ids[1]" {
		t.Fatalf("%+v", e)
	}
	out, err = execute(t, x, domain.EnablePath, as(operator), `{"ids":["d1","d3"],"reason":"back"}`)
	if err != nil || string(out) != `{"enabled":1}` {
		t.Fatalf("%s %v", out, err)
	}
	if s := statusOf(t, db); s["d1"] != "offline" || s["d3"] != "online" {
		t.Fatalf("%v", s)
	}

	// Other failures stay plain errors, for the operator's log.
	_ = store.Close()
	_, err = execute(t, x, domain.ListPath, as(viewer), `{}`)
	var agentErr *surface.Error
	if err == nil || errors.As(err, &agentErr) {
		t.Fatalf("a closed database gave %v", err)
	}
}

// Through the registry, an internal failure is a sanitised transport
// error: its text never reaches the agent.
func TestInternalFailureIsSanitised(t *testing.T) {
	e := newEnv(t, viewer)
	_ = e.store.Close()
	res := e.invoke("", domain.ListID, `{}`, "")
	cerr := surfacetest.RequireCode(t, res, surface.CodeExecutionFailed)
	b, _ := json.Marshal(res.Error)
	if cerr.Details["reason"] != "transport" || strings.Contains(string(b), "sql") || strings.Contains(string(b), "closed") {
		t.Fatalf("%s", b)
	}
}

// inputSchema returns the agent-visible input schema of the only
// procedure reference of a devices toolbar listing ref.
func inputSchema(t *testing.T, ref surface.Capability) map[string]any {
	t.Helper()
	store, _ := openSeeded(t)
	reg := surfacetest.NewRegistry(t, nil)
	reg.SetProcedureExecutor(domain.Procedures(store, nil))
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.toolbar", Description: "Toolbar", Procedures: []surface.Capability{ref}})
	procs := reg.Snapshot(surface.SnapshotOptions{}).Procedures
	if len(procs) != 1 {
		t.Fatalf("%+v", procs)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(procs[0].InputSchema), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// shape keeps what the Go type determines: property names, types, item
// types, descriptions and required names.
func shape(doc map[string]any) map[string]any {
	props := map[string]any{}
	for name, p := range doc["properties"].(map[string]any) {
		p := p.(map[string]any)
		keep := map[string]any{"type": p["type"], "description": p["description"]}
		if items, ok := p["items"].(map[string]any); ok {
			keep["items"] = items["type"]
		}
		props[name] = keep
	}
	return map[string]any{"properties": props, "required": doc["required"], "additionalProperties": doc["additionalProperties"]}
}

// The hand-written schemas (which add the domain's limits) describe the Go
// input types exactly: same fields, types, descriptions and required set.
func TestSchemasMatchTypes(t *testing.T) {
	inferredDisable := surface.Procedure(surface.ProcedureDef[domain.DisableInput, domain.DisableOutput]{
		ID: domain.DisableID, Description: "Disable devices", Effect: surface.EffectDestructive})
	inferredEnable := surface.Procedure(surface.ProcedureDef[domain.EnableInput, domain.EnableOutput]{
		ID: domain.EnableID, Description: "Enable devices", Effect: surface.EffectServerMutation})
	inferredList := surface.Procedure(surface.ProcedureDef[domain.ListInput, domain.ListOutput]{
		ID: domain.ListID, Description: "List devices", Effect: surface.EffectServerQuery})
	for _, c := range []struct {
		name           string
		ours, inferred surface.Capability
	}{
		{"disable", domain.DisableRef(nil, nil), inferredDisable},
		{"enable", domain.EnableRef(nil, nil), inferredEnable},
		{"list", domain.ListRef(), inferredList},
	} {
		ours, inferred := shape(inputSchema(t, c.ours)), shape(inputSchema(t, c.inferred))
		if !reflect.DeepEqual(ours, inferred) {
			t.Errorf("%s:\nours     %v\ninferred %v", c.name, ours, inferred)
		}
		if len(ours["properties"].(map[string]any)) == 0 {
			t.Fatalf("%s: empty shape %v", c.name, ours)
		}
	}
}

// The disable reference is unavailable while its binding selects nothing,
// in whatever JSON-ish form the binding returns its ids; a failing binding
// leaves the verdict to the invocation (binding-failed).
func TestDisableRefAvailability(t *testing.T) {
	cases := []struct {
		name      string
		bind      func(context.Context) (map[string]any, error)
		available bool
	}{
		{"[]string", func(context.Context) (map[string]any, error) { return map[string]any{"ids": []string{"d1"}}, nil }, true},
		{"empty []any", func(context.Context) (map[string]any, error) { return map[string]any{"ids": []any{}}, nil }, false},
		{"[]any", func(context.Context) (map[string]any, error) { return map[string]any{"ids": []any{"d1"}}, nil }, true},
		{"nil", func(context.Context) (map[string]any, error) { return map[string]any{"ids": nil}, nil }, false},
		{"failing", func(context.Context) (map[string]any, error) { return nil, errors.New("selection store down") }, true},
		{"not a list", func(context.Context) (map[string]any, error) { return map[string]any{"ids": "d1"}, nil }, true},
	}
	for _, c := range cases {
		store, _ := openSeeded(t)
		reg := surfacetest.NewRegistry(t, &surface.Options{Context: func() map[string]any { return map[string]any{"user": operator} }})
		reg.SetProcedureExecutor(domain.Procedures(store, nil))
		surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.table", Description: "Table",
			Procedures: []surface.Capability{domain.DisableRef(c.bind, nil)}})
		p := reg.Snapshot(surface.SnapshotOptions{}).Procedures[0]
		if p.Available != c.available {
			t.Errorf("%s: available %v", c.name, p.Available)
		}
		res := reg.Invoke(context.Background(), surface.Invocation{CapabilityID: domain.DisableID, Input: json.RawMessage(`{"reason":"r"}`)},
			surface.InvokeOptions{Consumer: surfacetest.Consumer()})
		switch {
		case !c.available:
			surfacetest.RequireCode(t, res, surface.CodeCapabilityNotAvailable)
		case c.name == "failing" || c.name == "not a list":
			surfacetest.RequireCode(t, res, surface.CodePreconditionFailed)
		default:
			surfacetest.RequireCode(t, res, surface.CodeConfirmationRequired)
		}
	}
}

func TestErrorTexts(t *testing.T) {
	nf := &domain.NotFoundError{IDs: []string{"d8", "d9"}}
	bad := &domain.InvalidError{Field: "reason", Problem: "give a reason"}
	if nf.Error() != "domain: unknown device id(s) d8, d9" || bad.Error() != "domain: invalid reason: give a reason" {
		t.Fatalf("%q %q", nf, bad)
	}
	if errors.Is(nf, domain.ErrInvalid) || errors.Is(bad, domain.ErrNotFound) {
		t.Fatal("errors match the wrong sentinel")
	}
}

// The disable and enable procedures pass the invocation id as the store's
// idempotency key: a retry through another replica's executor returns the
// first output and writes nothing; the id reused for another request is
// INVOCATION_CONFLICT (AS-IDENT-002, AS-IDENT-003 across replicas).
func TestProceduresDeduplicateByInvocationID(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		store, db := b.seeded(t)
		replicas := []surface.ProcedureExecutor{domain.Procedures(store, nil), domain.Procedures(db.open(t), nil)}
		host := map[string]any{"user": operator}
		long := strings.Repeat("i", 300) // longer than a store key: digested
		for _, id := range []string{"inv-42", long} {
			var outs []string
			for _, x := range replicas {
				out, err := executeID(t, x, domain.DisablePath, host, `{"ids":["d1","d2"],"reason":"r"}`, id)
				if err != nil {
					t.Fatalf("%.10s: %v", id, err)
				}
				outs = append(outs, string(out))
			}
			if outs[0] != `{"disabled":2}` || outs[1] != outs[0] {
				t.Fatalf("%.10s: outputs %v", id, outs)
			}
			// Enable them again for the next id.
			if _, err := executeID(t, replicas[1], domain.EnablePath, host, `{"ids":["d1","d2"],"reason":"r"}`, id+"-enable"); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(auditLog(t, db.raw)); n != 8 {
			t.Fatalf("%d audit rows, want 8 (2 devices, 2 ids, disable and enable)", n)
		}
		before := stateOf(t, db.raw)
		for _, call := range []struct{ path, input string }{
			{domain.DisablePath, `{"ids":["d3"],"reason":"r"}`},
			{domain.EnablePath, `{"ids":["d1","d2"],"reason":"r"}`},
		} {
			_, err := executeID(t, replicas[1], call.path, host, call.input, "inv-42")
			e := requireAgentError(t, err, surface.CodeInvocationConflict)
			if !reflect.DeepEqual(e.Details, map[string]any{"reason": "id-reused-with-different-request"}) || strings.Contains(e.Message, "d1") {
				t.Fatalf("%+v", e)
			}
		}
		requireUnchanged(t, before, stateOf(t, db.raw))
	})
}
