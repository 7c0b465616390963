package httpexec_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/httpexec"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// The executor behind a registry: a procedure reference with a bound,
// locked field calls the backend with the session's credentials and the
// merged input; the backend's refusals and failures come back typed and
// sanitised.
func TestThroughRegistry(t *testing.T) {
	var got []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(body))
		switch {
		case r.Header.Get("Authorization") != "Bearer s1":
			w.WriteHeader(http.StatusForbidden)
		case strings.Contains(string(body), `"boom"`):
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "panic: SELECT * FROM devices at /srv/db.go:12")
		default:
			io.WriteString(w, `{"disabled":1}`)
		}
	}))
	defer backend.Close()
	exec, err := httpexec.New(&httpexec.Options{BaseURL: backend.URL + "/rpc", Paths: []string{"devices.disable"}})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.CloseIdleConnections()

	host := map[string]any{"authorization": "Bearer s1"}
	reg := surfacetest.NewRegistry(t, &surface.Options{Context: func() map[string]any { return host }})
	reg.SetProcedureExecutor(exec)
	type in struct {
		IDs    []string `json:"ids"`
		Reason string   `json:"reason"`
	}
	type out struct {
		Disabled int `json:"disabled"`
	}
	surfacetest.MustRegister(t, reg, surface.Component{Type: "devices.table", Description: "Devices", Procedures: []surface.Capability{
		surface.Procedure(surface.ProcedureDef[in, out]{ID: "domain:devices.disable", Description: "Disable devices", Effect: surface.EffectServerMutation,
			Bound: []string{"ids"}, Bind: func(context.Context) (map[string]any, error) { return map[string]any{"ids": []string{"d1"}}, nil }}),
	}})
	call := func(input string) surface.Result {
		return reg.Invoke(context.Background(), surface.Invocation{CapabilityID: "domain:devices.disable", Input: json.RawMessage(input)}, surface.InvokeOptions{})
	}
	res := call(`{"reason":"maintenance"}`)
	surfacetest.RequireOK(t, res)
	if res.Output != `{"disabled":1}` || got[0] != `/rpc/devices.disable Bearer s1 {"ids":["d1"],"reason":"maintenance"}` {
		t.Fatalf("%s / %v", res.Output, got)
	}
	res = call(`{"reason":"boom"}`)
	e := surfacetest.RequireCode(t, res, surface.CodeExecutionFailed)
	b, _ := json.Marshal(res)
	if e.Retry != surface.RetryAfterDelay || strings.Contains(string(b), "SELECT") || strings.Contains(string(b), "/srv") {
		t.Fatalf("%s", b)
	}
	host["authorization"] = "Bearer stolen"
	if e := surfacetest.RequireCode(t, call(`{"reason":"x"}`), surface.CodeNotAuthorized); e.Details["origin"] != "server" {
		t.Fatalf("%+v", e)
	}
}
