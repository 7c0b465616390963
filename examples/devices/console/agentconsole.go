package console

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/surface"
)

// ChatEntry is one line of the page's agent console.
type ChatEntry struct {
	// Who is "you", "agent" (the model's text or a tool step) or "error".
	Who  string      `json:"who"`
	Text string      `json:"text,omitempty"`
	Step *agent.Step `json:"step,omitempty"`
	At   time.Time   `json:"at"`
}

// ErrBusy: the agent console is already working on a request.
var ErrBusy = errors.New("console: the agent is busy")

// ErrStopped: the user stopped the agent's run.
var ErrStopped = errors.New("console: the agent was stopped")

// StopAgent stops the embedded agent's run, if one is in progress: its
// context is cancelled (a model request in flight ends at once) and its
// pending approvals expire. The run's channel receives ErrStopped. It
// reports whether a run was stopped.
func (s *Session) StopAgent() bool { return s.agent().stop() }

// agentConsole is the page's embedded agent: a model loop (or the scripted
// agent) over the session's toolset in the embedded topology, where a call
// that needs approval waits for the user's click in the same page.
type agentConsole struct {
	s      *Session
	runner agent.Runner
	name   string

	mu      sync.Mutex
	entries []ChatEntry
	running bool
	stopped bool // the user stopped the run in progress
	cancel  context.CancelFunc
	tools   *embeddedTools
}

func newAgentConsole(s *Session, r agent.Runner, name string) *agentConsole {
	if r == nil {
		r = &agent.Scripted{}
	}
	return &agentConsole{s: s, runner: r, name: name}
}

// Ask starts the embedded agent on prompt. The returned channel receives
// the run's error (nil on success) when it ends.
func (s *Session) Ask(prompt string) (<-chan error, error) { return s.agent().ask(prompt) }

// Chat returns the agent console's entries, oldest first.
func (s *Session) Chat() []ChatEntry {
	c := s.agent()
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.entries)
}

func (c *agentConsole) ask(prompt string) (<-chan error, error) {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return nil, ErrBusy
	}
	if c.tools == nil {
		ts, err := surface.NewToolset(c.s.Registry(), surface.ToolsetOptions{Consumer: ConsoleConsumer, Topology: surface.TopologyEmbedded})
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
		c.tools = &embeddedTools{ts: ts}
	}
	// The run ends with the session.
	ctx, cancel := context.WithCancel(c.s.ws.Context())
	if ctx.Err() != nil || !c.s.app.startRun() {
		c.mu.Unlock()
		cancel()
		return nil, ErrClosed
	}
	c.running, c.stopped, c.cancel = true, false, cancel
	c.appendLocked(ChatEntry{Who: "you", Text: prompt})
	tools := c.tools
	c.mu.Unlock()
	c.s.changed(partAgent)

	done := make(chan error, 1)
	go func() {
		defer c.s.app.runs.Done()
		defer cancel()
		err := c.runner.Run(ctx, prompt, tools, func(st agent.Step) {
			c.add(ChatEntry{Who: "agent", Step: &st})
		})
		c.mu.Lock()
		stopped := c.stopped
		c.mu.Unlock()
		switch {
		case stopped:
			err = ErrStopped
			c.add(ChatEntry{Who: "error", Text: "Stopped."})
		case err != nil:
			c.add(ChatEntry{Who: "error", Text: err.Error()})
		default:
			c.add(ChatEntry{Who: "agent", Text: "Done."})
		}
		c.mu.Lock()
		c.running, c.cancel = false, nil
		c.mu.Unlock()
		c.s.changed(partAgent)
		done <- err
	}()
	return done, nil
}

func (c *agentConsole) add(e ChatEntry) {
	c.mu.Lock()
	c.appendLocked(e)
	c.mu.Unlock()
	c.s.changed(partAgent)
}

func (c *agentConsole) appendLocked(e ChatEntry) {
	e.At = time.Now()
	c.entries = append(c.entries, e)
	if len(c.entries) > 200 {
		c.entries = slices.Delete(c.entries, 0, len(c.entries)-200)
	}
}

func (c *agentConsole) stop() bool {
	c.mu.Lock()
	if !c.running || c.stopped {
		c.mu.Unlock()
		return false
	}
	c.stopped = true
	c.cancel()
	c.mu.Unlock()
	// What the run asked for and no longer waits for.
	key := ConsoleConsumer.Key()
	for _, p := range c.s.Pending() {
		if p.ConsumerKey == key {
			c.s.Registry().Confirmations().Expire(p.ConfirmationID)
		}
	}
	c.s.changed(partAgent)
	return true
}

// scripted reports whether the console's agent is the scripted one,
// which plays its fixed task whatever the prompt says.
func (c *agentConsole) scripted() bool {
	_, ok := c.runner.(*agent.Scripted)
	return ok
}

// busy reports whether a run is in progress.
func (c *agentConsole) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// embeddedTools are the agent.Tools of the embedded agent: the session's
// toolset. A call goes through the catalog the agent last listed, so a
// tool whose component was replaced or unmounted since is refused as
// stale rather than reaching whatever carries its name now.
type embeddedTools struct {
	ts *surface.Toolset
}

// List implements agent.Tools.
func (e *embeddedTools) List(context.Context) ([]agent.Tool, error) {
	tools := e.ts.Tools()
	out := make([]agent.Tool, len(tools))
	for i, t := range tools {
		out[i] = fromSurface(t)
	}
	return out, nil
}

// Call implements agent.Tools.
func (e *embeddedTools) Call(ctx context.Context, name string, args json.RawMessage) (surface.Result, error) {
	return e.ts.Call(ctx, name, args, surface.CallOptions{}), nil
}

// fromSurface describes a toolset tool for an agent.
func fromSurface(t surface.Tool) agent.Tool {
	return agent.Tool{
		Name: t.Name, Description: t.Description, InputSchema: t.InputSchema.Raw(),
		CapabilityID: t.CapabilityID, Effect: string(t.Effect),
		Available: t.State.Available, UnavailableReason: t.State.UnavailableReason,
	}
}
