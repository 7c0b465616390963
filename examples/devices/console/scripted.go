package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/surface"
)

// ScriptedRun configures [Session.PlayScripted].
type ScriptedRun struct {
	// URL is the console's MCP endpoint ("http://127.0.0.1:8080/mcp").
	URL string
	// Approver, if set, approves every confirmation through the host API
	// as this actor, for runs without a browser; otherwise the run waits
	// for the user's decision in the page.
	Approver string
	// Waiting, if set, is told what the user is asked to approve when the
	// run starts waiting.
	Waiting func(summary string)
	// Report receives every step.
	Report func(agent.Step)
	// HTTPClient makes the MCP requests. Default http.DefaultClient.
	HTTPClient *http.Client
}

// ErrDenied: the user denied the scripted agent's request.
var ErrDenied = errors.New("console: the request was denied")

// PlayScripted runs the scripted agent against this session over MCP, as
// a remote agent would: a go-sdk client over HTTP with the session's
// token, two-phase confirmations. It returns nil when every step got the
// expected outcome.
func (s *Session) PlayScripted(ctx context.Context, run ScriptedRun) error {
	m, err := agent.Dial(ctx, run.URL, &agent.DialOptions{Token: s.Token(), HTTPClient: run.HTTPClient, Name: "scripted-agent"})
	if err != nil {
		return err
	}
	defer m.Close()
	a := &agent.Scripted{
		TwoPhase: true,
		AwaitApproval: func(ctx context.Context, id, summary string) error {
			if run.Approver != "" {
				if _, ok := s.Decide(id, true, run.Approver); !ok {
					return fmt.Errorf("console: confirmation %s is not pending", id)
				}
				return nil
			}
			if run.Waiting != nil {
				run.Waiting(summary)
			}
			switch s.AwaitDecision(ctx, id) {
			case surface.OutcomeApproved:
				return nil
			case surface.OutcomeDenied:
				return ErrDenied
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errors.New("console: the request expired before anyone decided")
		},
	}
	return a.Run(ctx, "", m, run.Report)
}
