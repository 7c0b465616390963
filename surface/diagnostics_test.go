package surface_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// captureStderr runs f with os.Stderr redirected and returns what was
// written. Registries capture os.Stderr when they are made, so f makes
// them; the test is not parallel.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	stderr := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = stderr }()
	f()
	os.Stderr = stderr
	w.Close()
	return string(<-done)
}

// The development audit console prints each record on one line,
// "[agent-surface audit]" then key=value in a stable order, on stderr.
// AS-OBSV-002.
func TestDevConsoleLines_AS_OBSV_002(t *testing.T) {
	out := captureStderr(t, func() {
		reg := surface.New(&surface.Options{Environment: surface.EnvDevelopment})
		surfacetest.MustRegister(t, reg, newProbe().component("main"))
		surfacetest.RequireOK(t, reg.Invoke(bg, inv("call 1", selectID, `{"ids":[]}`), as("a")))
		_ = reg.Close()
	})
	var audit []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "[agent-surface audit] ") {
			audit = append(audit, strings.TrimSuffix(line, "\n"))
		}
	}
	if len(audit) != 3 {
		t.Fatalf("want registration, start and settlement lines, got %d in:\n%s", len(audit), out)
	}
	if !regexp.MustCompile(`^\[agent-surface audit\] type=registration at=\S+Z registrationId=reg_\S+$`).MatchString(audit[0]) {
		t.Fatalf("registration line: %s", audit[0])
	}
	settled := regexp.MustCompile(`^\[agent-surface audit\] type=invocation-settled at=\S+ capabilityId=view:devices.table.selectRows ` +
		`registrationId=reg_\S+ invocationId="call 1" consumerId=mcp-bridge:a status=ok durationMs=\d+ queueWaitMs=\d+ executionMs=\d+$`)
	if !settled.MatchString(audit[2]) {
		t.Fatalf("settlement line (fields out of order?): %s", audit[2])
	}
}

// In development and test the default logger writes diagnostics to
// stderr; production discards them.
func TestDefaultLoggerOnStderrInDevAndTest(t *testing.T) {
	for _, c := range []struct {
		env  surface.Environment
		want bool
	}{{surface.EnvDevelopment, true}, {surface.EnvTest, true}, {surface.EnvProduction, false}} {
		out := captureStderr(t, func() {
			reg := surface.New(&surface.Options{Environment: c.env})
			surfacetest.MustRegister(t, reg, simple("panel", "main"))
			h, _ := reg.Register(simple("panel", "main")) // a duplicate: rejected with a warning
			if h.Status() != surface.HandleRejected {
				t.Fatal("duplicate accepted")
			}
			_ = reg.Close()
		})
		if got := strings.Contains(out, "duplicate instance rejected"); got != c.want {
			t.Errorf("%s: warning on stderr = %v, want %v:\n%s", c.env, got, c.want, out)
		}
	}
}

// An operator who asks sees an agent probing reads: observation calls
// refused before their handler ran are audited at metadata level; reads
// that run are not, and without the option nothing is (the spec's level
// none).
func TestAuditObservationRefusals(t *testing.T) {
	hidden := surface.Policy{Name: "hide-secrets", Discover: func(*surface.PolicyContext) surface.Decision { return surface.Hide() }}
	secret := surface.Component{Type: "vault", Description: "Vault", Policies: []surface.Policy{hidden},
		Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads the vault", "s3cr3t")}}
	signedOut := surface.Policy{Name: "signed-in", Authorize: func(context.Context, *surface.PolicyContext, surface.Next) surface.Result {
		return surface.Fail(surface.NewError(surface.CodeNotAuthenticated, "", nil))
	}}
	login := surface.Component{Type: "account", Description: "Account", Policies: []surface.Policy{signedOut},
		Observations: map[string]surface.Capability{"read": surfacetest.Value("Reads the account", 1)}}
	settledOf := func(sink *surface.MemorySink) []surface.AuditEvent {
		var out []surface.AuditEvent
		for _, e := range sink.Events() {
			if e.Type == surface.AuditInvocationSettled || e.Type == surface.AuditInvocationStarted {
				out = append(out, e)
			}
		}
		return out
	}
	for _, on := range []bool{false, true} {
		sink := surface.NewMemorySink(0)
		reg := surfacetest.NewRegistry(t, &surface.Options{Audit: sink, AuditObservationRefusals: on})
		surfacetest.MustRegister(t, reg, secret)
		ha := surfacetest.MustRegister(t, reg, login)
		surfacetest.MustRegister(t, reg, simple("panel", ""))
		surfacetest.RequireCode(t, reg.Invoke(bg, surface.Invocation{InvocationID: "p1", CapabilityID: "view:vault.read"}, as("a")), surface.CodeCapabilityNotFound)
		surfacetest.RequireCode(t, reg.Invoke(bg, surface.Invocation{InvocationID: "p2", CapabilityID: "view:account.read"}, as("a")), surface.CodeNotAuthenticated)
		surfacetest.RequireOK(t, reg.Invoke(bg, surface.Invocation{InvocationID: "p3", CapabilityID: "view:panel.read"}, as("a")))
		got := settledOf(sink)
		// A hidden observation does not exist for the consumer: its call
		// fails resolution, and is audited as any call naming nothing is
		// (semantics §14: a phase-2 failure, at metadata level, without a
		// registration id), with or without the option.
		if len(got) == 0 || got[0].InvocationID != "p1" || got[0].RegistrationID != "" || got[0].Code != surface.CodeCapabilityNotFound {
			t.Fatalf("the hidden read is not audited as an unknown id: %+v", got)
		}
		if !on {
			if len(got) != 1 {
				t.Fatalf("default: observations audited: %+v", got)
			}
			continue
		}
		if len(got) != 2 {
			t.Fatalf("want two refusals audited, got %+v", got)
		}
		for i, want := range []struct {
			inv, reg string
			code     surface.Code
		}{{"p1", "", surface.CodeCapabilityNotFound}, {"p2", ha.ID(), surface.CodeNotAuthenticated}} {
			e := got[i]
			if e.Type != surface.AuditInvocationSettled || e.InvocationID != want.inv || e.RegistrationID != want.reg || e.Code != want.code ||
				e.ConsumerID != "mcp-bridge:a" || e.Status != surface.StatusError || e.Payload != nil || e.ExecutionMs != nil {
				t.Errorf("refusal %d: %+v", i, e)
			}
		}
	}
}

// Redact covers audit payloads; the operator's log gets a handler error's
// text under "error", next to the capability id, where the Logger's own
// ReplaceAttr can redact it. The agent never sees it.
func TestRedactBoundary(t *testing.T) {
	const secret = "postgres://admin:hunter2@db.internal"
	failing := surface.Component{Type: "report", Description: "Report",
		Actions: map[string]surface.Capability{"run": surface.Action(surface.ActionDef[surface.None, surface.None]{
			Description: "Runs", Effect: surface.EffectLocalState, Audit: surface.AuditLevelFull,
			Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
				return surface.None{}, errors.New("dial " + secret + ": refused")
			},
		})}}
	redact := func(string, surface.AuditPayload) surface.AuditPayload { return surface.AuditPayload{Truncated: true} }
	for _, scrub := range []bool{false, true} {
		var logs syncBuffer
		hopts := &slog.HandlerOptions{}
		if scrub {
			hopts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == "error" {
					return slog.String("error", "[redacted]")
				}
				return a
			}
		}
		sink := surface.NewMemorySink(0)
		reg := surfacetest.NewRegistry(t, &surface.Options{Audit: sink, Redact: redact, Logger: slog.New(slog.NewJSONHandler(&logs, hopts))})
		surfacetest.MustRegister(t, reg, failing)
		res := reg.Invoke(bg, surface.Invocation{CapabilityID: "view:report.run"}, as("a"))
		surfacetest.RequireCode(t, res, surface.CodeExecutionFailed)
		b, _ := json.Marshal(res)
		audit, _ := json.Marshal(sink.Events())
		if strings.Contains(string(b), "hunter2") || strings.Contains(string(audit), "hunter2") {
			t.Fatalf("the secret reached the agent or the audit trail: %s %s", b, audit)
		}
		var line struct {
			CapabilityID string `json:"capabilityId"`
			Error        string `json:"error"`
		}
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, `"capabilityId":"view:report.run"`) && strings.Contains(l, `"error"`) {
				_ = json.Unmarshal([]byte(l), &line)
			}
		}
		if scrub && (line.Error != "[redacted]" || strings.Contains(logs.String(), "hunter2")) {
			t.Fatalf("ReplaceAttr did not redact: %s", logs.String())
		}
		if !scrub && !strings.Contains(line.Error, secret) {
			t.Fatalf("the operator's log lacks the cause under \"error\": %s", logs.String())
		}
	}
}

// failingSink fails every record.
type failingSink struct{}

func (failingSink) Record(context.Context, surface.AuditEvent) error {
	return errors.New("disk full")
}

// A failing sink loses records, never calls: the registry logs the
// failure. An AsyncSink says when it drops and counts what its inner sink
// refused.
func TestAuditSinkErrorsLogged(t *testing.T) {
	var logs syncBuffer
	reg := surfacetest.NewRegistry(t, &surface.Options{Audit: failingSink{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	surfacetest.MustRegister(t, reg, newProbe().component("main"))
	surfacetest.RequireOK(t, reg.Invoke(bg, inv("c1", selectID, `{"ids":[]}`), as("a")))
	if out := logs.String(); !strings.Contains(out, "audit sink failed") || !strings.Contains(out, "disk full") || !strings.Contains(out, "invocationId=c1") {
		t.Fatalf("sink failure not logged: %s", out)
	}

	async := surface.NewAsyncSink(failingSink{}, 1)
	var dropped int
	for range 50 {
		if err := async.Record(bg, surface.AuditEvent{Type: surface.AuditRegistration}); errors.Is(err, surface.ErrAuditDropped) {
			dropped++
		}
	}
	_ = async.Close()
	if err := async.Record(bg, surface.AuditEvent{}); !errors.Is(err, surface.ErrAuditDropped) {
		t.Fatalf("Record after Close: %v", err)
	}
	if uint64(dropped+1) != async.Dropped() || async.Failed()+async.Dropped() != 51 {
		t.Fatalf("dropped %d (counted %d), failed %d", dropped, async.Dropped(), async.Failed())
	}
}

// A cancelled call still leaves its record, and the sink's context is
// never cancelled.
func TestAuditContextNotCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	sink := &doneSink{}
	reg := surfacetest.NewRegistry(t, &surface.Options{Audit: sink})
	surfacetest.MustRegister(t, reg, newProbe().component("main"))
	res := reg.Invoke(ctx, inv("c1", selectID, `{"ids":[]}`), as("a"))
	_ = res
	if sink.n == 0 || sink.cancelled {
		t.Fatalf("%d records, a cancellable context: %v", sink.n, sink.cancelled)
	}
}

type doneSink struct {
	n         int
	cancelled bool
}

func (s *doneSink) Record(ctx context.Context, _ surface.AuditEvent) error {
	s.n++
	s.cancelled = s.cancelled || ctx.Done() != nil
	return nil
}
