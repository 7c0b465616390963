package httpexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/httpexec"
)

func ExampleNew() {
	// The domain backend: it authenticates the caller itself and never
	// trusts the agent's input or the confirmation headers.
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/rpc/devices.disable" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer alice-session" {
			http.Error(w, `{"message":"bad token"}`, http.StatusUnauthorized)
			return
		}
		var in struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ID == "" {
			http.Error(w, `{"message":"id is required"}`, http.StatusUnprocessableEntity)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"disabled":true}`, in.ID)
	}))
	defer backend.Close()

	exec, err := httpexec.New(&httpexec.Options{
		BaseURL: backend.URL + "/rpc",
		Paths:   []string{"devices.disable"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer exec.CloseIdleConnections()
	// In an application: reg.SetProcedureExecutor(exec).

	ctx := context.Background()
	out, err := exec.Execute(ctx, &surface.ProcedureCall{
		ProcedureID:  "domain:devices.disable",
		Path:         "devices.disable",
		Input:        json.RawMessage(`{"id":"dev-42"}`),
		InvocationID: "inv_1",
		Host:         map[string]any{"authorization": "Bearer alice-session"},
	})
	fmt.Println(string(out), err)

	// Without the user's credentials the backend refuses.
	_, err = exec.Execute(ctx, &surface.ProcedureCall{
		ProcedureID:  "domain:devices.disable",
		Path:         "devices.disable",
		Input:        json.RawMessage(`{"id":"dev-42"}`),
		InvocationID: "inv_2",
	})
	fmt.Println(errors.Is(err, surface.CodeNotAuthorized))

	// Paths outside the manifest are refused without a request.
	_, err = exec.Execute(ctx, &surface.ProcedureCall{Path: "devices.delete"})
	fmt.Println(errors.Is(err, httpexec.ErrUnknownPath))
	// Output:
	// {"id":"dev-42","disabled":true} <nil>
	// true
	// true
}
