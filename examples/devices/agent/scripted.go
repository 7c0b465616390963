package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentsurface/agentsurface/surface"
)

// Capability ids the scripted task uses.
const (
	capReadState  = "view:devices.table.readState"
	capSetFilter  = "view:devices.table.setFilter"
	capSelectRows = "view:devices.table.selectRows"
	capOpenDevice = "view:devices.table.openDevice"
	capReadDevice = "view:devices.detail.readDevice"
	capClose      = "view:devices.detail.close"
	capDisable    = "domain:devices.disable"
	capEnable     = "domain:devices.enable"
)

// Scripted is an agent without a model: it plays the devices console's
// demo task and checks the outcome of every step. It ignores the prompt
// (and says so when it is given one). The task:
//
//  1. discover the tools and read the table (all devices: it clears the
//     filters first if some are set), and plan from what it read: the
//     site is Site if two of its devices are offline, else the site with
//     the most offline devices, at least two; when no site has two left
//     (an earlier run disabled them), it stops and says so;
//  2. filter to the offline devices of that site and select them;
//  3. open the first one's detail panel, read it, then open the second
//     one: the first panel closes and another replaces it;
//  4. call the first panel's readDevice from the catalog it was shown:
//     STALE_CAPABILITY (the registration was replaced), handled by
//     discovering again and reading the panel now open;
//  5. go back (close the panel), list the tools again (a destructive
//     procedure called from a catalog older than the last surface change
//     is refused as stale) and disable the selection: two-phase
//     tools answer CONFIRMATION_REQUIRED (with the approve link the
//     agent hands the user, when the server gives one), the user
//     approves, the retry succeeds; waiting tools return once the user
//     approved;
//  6. read the table again to verify the devices are disabled;
//  7. when the user approved with a standing grant for these devices
//     (AwaitApproval says so), show the grant at work: enable the first
//     device again (no approval needed) and disable it again, which runs
//     without asking (the result names the grant); then select a device
//     the grant does not cover (an online one of the site) and disable
//     it: outside the grant, the call asks again, and the agent hands
//     the user the new link and goes on as they decide (a denial runs
//     nothing, which it verifies in the table).
//
// Run returns an error naming the first step whose outcome differs from
// the expected one; it stops there.
type Scripted struct {
	// Site is the site whose offline devices are disabled. Default "London".
	Site string
	// Reason is the reason given to devices.disable.
	// Default "offline during the maintenance window".
	Reason string
	// TwoPhase says that the tools answer CONFIRMATION_REQUIRED and expect
	// a retry (an MCP client); false means a call that needs approval
	// waits for the user and returns the final result (an embedded loop).
	TwoPhase bool
	// AwaitApproval, in two-phase mode, returns the user's decision on a
	// confirmation the agent handed them (or decides itself, for headless
	// runs): how they decided, and the standing grant they gave with an
	// approval, if any. An error means no decision came (the request
	// expired, ctx ended). Nil means retrying every second until the
	// answer is no longer CONFIRMATION_REQUIRED, as any remote agent can.
	AwaitApproval func(ctx context.Context, a Approval) (Decision, error)
	// Now is the clock that times the steps. Default time.Now.
	Now func() time.Time
}

// Run plays the task. It ignores prompt; a non-empty one gets a first
// step saying so.
func (a *Scripted) Run(ctx context.Context, prompt string, tools Tools, report func(Step)) error {
	r := &run{a: a, tools: tools, report: report, now: a.Now}
	if r.now == nil {
		r.now = time.Now
	}
	if r.report == nil {
		r.report = func(Step) {}
	}
	if strings.TrimSpace(prompt) != "" {
		r.emit(Step{Title: IgnoresPrompt, Outcome: "note"})
	}
	return r.play(ctx)
}

// Approval is a confirmation request the scripted agent hands the user.
type Approval struct {
	ConfirmationID string
	// Summary is what the user is asked to approve.
	Summary string
	// ApproveURL is the link to the approve page the server gave with the
	// request (CONFIRMATION_REQUIRED's details.approveUrl), or "".
	ApproveURL string
	// N counts the requests of the run from 1: the task's disable is the
	// first; a later one is a call the agent makes outside a grant.
	N int
}

// Decision is how the user decided a request ([Scripted].AwaitApproval).
type Decision struct {
	// Approved is true for an approval, false for a denial.
	Approved bool
	// GrantID is the standing grant the user gave with the approval
	// ("approve, and allow this for N minutes for these devices"), or "".
	GrantID string
	// Note says how they decided, for the transcript.
	Note string
}

// IgnoresPrompt is what the scripted agent says when it is given a prompt.
const IgnoresPrompt = "I am the scripted agent: I play the demo task (disable the offline devices of one site, checking every step) whatever the prompt says. A model follows prompts: start the demo with --model-url."

// ErrNothingToDo: no site has two offline devices for the task.
var ErrNothingToDo = errors.New("agent: no site has two offline devices to disable")

// run is one play of the task.
type run struct {
	a      *Scripted
	tools  Tools
	report func(Step)
	now    func() time.Time
	n      int
	asked  int             // the confirmation requests handed to the user
	shown  map[string]Tool // by capability id, from the last discovery
}

// errStep is returned when a step got an unexpected outcome.
var errStep = errors.New("agent: unexpected outcome")

func (r *run) play(ctx context.Context) error {
	reason := firstNonEmpty(r.a.Reason, "offline during the maintenance window")

	if err := r.discover(ctx, "discover the tools", capReadState, capSetFilter, capSelectRows, capOpenDevice, capDisable); err != nil {
		return err
	}
	res, err := r.call(ctx, "read the devices table", capReadState, nil, "ok")
	if err != nil {
		return err
	}
	var table tableState
	_ = res.Decode(&table)
	if table.Filters.Site != "" || table.Filters.Status != "" {
		if _, err := r.call(ctx, "show all devices", capSetFilter, map[string]any{}, "ok"); err != nil {
			return err
		}
		if res, err = r.call(ctx, "read the devices table", capReadState, nil, "ok"); err != nil {
			return err
		}
		table = tableState{}
		_ = res.Decode(&table)
	}
	site, note, err := planSite(table.Rows, firstNonEmpty(r.a.Site, "London"))
	if err != nil {
		r.emit(Step{Title: "plan from the table", Outcome: "nothing to do", Want: "planned", Detail: err.Error()})
		return err
	}
	r.emit(Step{Title: "plan from the table", Outcome: "planned", Want: "planned", Detail: note})
	if _, err := r.call(ctx, "filter to offline devices in "+site, capSetFilter, map[string]any{"site": site, "status": "offline"}, "ok"); err != nil {
		return err
	}
	if res, err = r.call(ctx, "read the filtered table", capReadState, nil, "ok"); err != nil {
		return err
	}
	table = tableState{}
	if err := res.Decode(&table); err != nil || len(table.Rows) < 2 {
		return r.fail("read the filtered table", fmt.Sprintf("want two offline devices in %s, got %d", site, len(table.Rows)))
	}
	ids := make([]string, len(table.Rows))
	for i, row := range table.Rows {
		ids[i] = row.ID
	}
	if _, err := r.call(ctx, "select them", capSelectRows, map[string]any{"ids": ids}, "ok"); err != nil {
		return err
	}
	first, second := table.Rows[0], table.Rows[1]
	if _, err := r.call(ctx, "open "+first.Name, capOpenDevice, map[string]any{"id": first.ID}, "ok"); err != nil {
		return err
	}
	if err := r.discover(ctx, "discover the detail panel", capReadDevice, capClose); err != nil {
		return err
	}
	stalePanel := r.shown[capReadDevice] // as shown for the first device
	if _, err := r.call(ctx, "read "+first.Name, capReadDevice, nil, "ok"); err != nil {
		return err
	}
	if _, err := r.call(ctx, "open "+second.Name+" (the first panel closes)", capOpenDevice, map[string]any{"id": second.ID}, "ok"); err != nil {
		return err
	}
	res, err = r.callTool(ctx, "read the closed panel (stale catalog)", stalePanel, nil, string(surface.CodeStaleCapability))
	if err != nil {
		return err
	}
	if reason := res.Error.Reason(); reason != surface.ReasonRegistrationReplaced {
		return r.fail("read the closed panel (stale catalog)", "want reason registration-replaced, got "+string(reason))
	}
	if err := r.discover(ctx, "discover again", capReadDevice, capClose); err != nil {
		return err
	}
	res, err = r.call(ctx, "read "+second.Name, capReadDevice, nil, "ok")
	if err != nil {
		return err
	}
	var detail struct {
		Device struct {
			ID string `json:"id"`
		} `json:"device"`
	}
	if err := res.Decode(&detail); err != nil || detail.Device.ID != second.ID {
		return r.fail("read "+second.Name, "the panel shows another device")
	}
	if _, err := r.call(ctx, "go back (close the panel)", capClose, nil, "ok"); err != nil {
		return err
	}
	// The surface changed: a destructive procedure is only called from a
	// catalog listed after the change (an older one is refused as stale).
	if err := r.discover(ctx, "discover the tools after going back", capDisable); err != nil {
		return err
	}

	disable := map[string]any{"reason": reason}
	var decided Decision
	if !r.a.TwoPhase {
		if _, err := r.call(ctx, "disable the selection (waits for approval)", capDisable, disable, "ok"); err != nil {
			return err
		}
	} else {
		res, err = r.call(ctx, "disable the selection", capDisable, disable, string(surface.CodeConfirmationRequired))
		if err != nil {
			return err
		}
		if decided, err = r.awaitApproval(ctx, res, disable); err != nil {
			return err
		}
	}

	if _, err := r.call(ctx, "show disabled devices in "+site, capSetFilter, map[string]any{"site": site, "status": "disabled"}, "ok"); err != nil {
		return err
	}
	res, err = r.call(ctx, "verify in the table", capReadState, nil, "ok")
	if err != nil {
		return err
	}
	table = tableState{}
	_ = res.Decode(&table)
	for _, id := range ids {
		if !slices.ContainsFunc(table.Rows, func(row tableRow) bool { return row.ID == id && row.Status == "disabled" }) {
			return r.fail("verify in the table", id+" is not disabled")
		}
	}
	if decided.GrantID == "" {
		return nil
	}
	return r.grantAtWork(ctx, site, first, ids, disable, decided.GrantID)
}

// grantAtWork shows the standing grant grantID the user gave with the
// approval of the disable of the devices granted, with the arguments
// disable: a later disable of dev (one of them) runs without asking; a
// disable of a device outside the grant asks again.
func (r *run) grantAtWork(ctx context.Context, site string, dev tableRow, granted []string, disable map[string]any, grantID string) error {
	r.emit(Step{Title: "the user gave a standing grant", Outcome: "note", Detail: grantID +
		" for these devices: a disable within it runs without asking; one outside it asks again"})
	if _, err := r.call(ctx, "show every device in "+site, capSetFilter, map[string]any{"site": site}, "ok"); err != nil {
		return err
	}
	res, err := r.call(ctx, "read the table", capReadState, nil, "ok")
	if err != nil {
		return err
	}
	var table tableState
	_ = res.Decode(&table)
	if _, err := r.call(ctx, "select "+dev.Name, capSelectRows, map[string]any{"ids": []string{dev.ID}}, "ok"); err != nil {
		return err
	}
	if err := r.discover(ctx, "discover the tools", capEnable, capDisable); err != nil {
		return err
	}
	if _, err := r.call(ctx, "enable "+dev.Name+" again (no approval needed)", capEnable, map[string]any{"reason": "back for a check"}, "ok"); err != nil {
		return err
	}
	if err := r.discover(ctx, "discover the tools", capDisable); err != nil {
		return err
	}
	const within = "disable it again: within the grant"
	if res, err = r.call(ctx, within, capDisable, disable, "ok"); err != nil {
		return err
	}
	if res.GrantID != grantID {
		return r.fail(within, "want the call allowed by "+grantID+", got "+firstNonEmpty(res.GrantID, "no grant"))
	}

	// A device the grant does not cover: an online one of the site.
	i := slices.IndexFunc(table.Rows, func(row tableRow) bool { return row.Status == "online" && !slices.Contains(granted, row.ID) })
	if i < 0 {
		r.emit(Step{Title: "No online device in " + site + " to show a call outside the grant."})
		return nil
	}
	other := table.Rows[i]
	if _, err := r.call(ctx, "select "+other.Name, capSelectRows, map[string]any{"ids": []string{other.ID}}, "ok"); err != nil {
		return err
	}
	if err := r.discover(ctx, "discover the tools", capDisable); err != nil {
		return err
	}
	if res, err = r.call(ctx, "disable "+other.Name+": outside the grant", capDisable, disable, string(surface.CodeConfirmationRequired)); err != nil {
		return err
	}
	decided, err := r.awaitApproval(ctx, res, disable)
	if err != nil {
		return err
	}
	want := "online"
	if decided.Approved {
		want = "disabled"
	}
	if res, err = r.call(ctx, "verify "+other.Name+" in the table", capReadState, nil, "ok"); err != nil {
		return err
	}
	table = tableState{}
	_ = res.Decode(&table)
	if !slices.ContainsFunc(table.Rows, func(row tableRow) bool { return row.ID == other.ID && row.Status == want }) {
		return r.fail("verify "+other.Name+" in the table", other.ID+" is not "+want)
	}
	return nil
}

// awaitApproval hands the user the confirmation request of res (a
// CONFIRMATION_REQUIRED of the disable call with args), with its approve
// link when the server gave one, waits for their decision and retries the
// call (two-phase mode). The task's request must be approved; a later one
// may be denied, and then nothing is retried.
func (r *run) awaitApproval(ctx context.Context, res surface.Result, args map[string]any) (Decision, error) {
	const title = "retry after approval"
	r.asked++
	first := r.asked == 1
	ap := Approval{ConfirmationID: res.Error.ConfirmationID(), Summary: res.Error.Summary(), ApproveURL: res.Error.ApproveURL(), N: r.asked}
	if ap.ApproveURL != "" {
		r.emit(Step{Title: "hand the user the approve link", Outcome: "link given", Want: "link given", Detail: ap.Summary, Link: ap.ApproveURL})
	}
	start := r.now()
	decided := Decision{Approved: true}
	if r.a.AwaitApproval != nil {
		var err error
		decided, err = r.a.AwaitApproval(ctx, ap)
		step := Step{Title: "wait for the user's decision", Outcome: decisionOutcome(decided), Detail: firstNonEmpty(decided.Note, ap.Summary), Duration: r.now().Sub(start)}
		if first {
			step.Want = step.Outcome // the task's request must be approved
			if !decided.Approved {
				step.Want = "approved"
			}
		}
		if err != nil {
			step.Outcome, step.Want, step.Detail = "error", "decided", err.Error()
		}
		r.emit(step)
		if err != nil {
			return decided, fmt.Errorf("%w: waiting for approval: %w", errStep, err)
		}
		if !step.Expected() {
			return decided, fmt.Errorf("%w: the task's request was denied", errStep)
		}
		if !decided.Approved {
			return decided, nil // nothing to retry: nothing runs
		}
		if res, err = r.call(ctx, title, capDisable, args, "ok"); err != nil {
			return decided, err
		}
	} else {
		// What any remote agent can do: call again until the answer
		// changes. The server presents the pending confirmation itself.
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return decided, ctx.Err()
			case <-tick.C:
			}
			var err error
			res, err = r.tools.Call(ctx, r.shown[capDisable].Name, mustJSON(args))
			if err != nil {
				return decided, fmt.Errorf("%w: %s: %v", errStep, title, err)
			}
			if Outcome(res) != string(surface.CodeConfirmationRequired) {
				break
			}
		}
		step := Step{Title: title + " (polled)", Tool: r.shown[capDisable].Name, Args: mustJSON(args), Outcome: Outcome(res), Want: "ok", Detail: detail(res), Duration: r.now().Sub(start)}
		r.emit(step)
		if !step.Expected() {
			return decided, fmt.Errorf("%w: %s: got %s, want ok", errStep, title, step.Outcome)
		}
	}
	var out struct {
		Disabled int `json:"disabled"`
	}
	if err := res.Decode(&out); err != nil || out.Disabled < 1 {
		return decided, r.fail(title, "nothing was disabled")
	}
	return decided, nil
}

// decisionOutcome is the transcript's outcome of a decision.
func decisionOutcome(d Decision) string {
	switch {
	case !d.Approved:
		return "denied"
	case d.GrantID != "":
		return "approved with a grant"
	}
	return "approved"
}

// discover lists the tools and checks that the capabilities want are
// among them.
func (r *run) discover(ctx context.Context, title string, want ...string) error {
	start := r.now()
	tools, err := r.tools.List(ctx)
	d := r.now().Sub(start)
	if err != nil {
		r.emit(Step{Title: title, Tool: "tools/list", Outcome: "error", Want: "ok", Detail: err.Error(), Duration: d})
		return fmt.Errorf("%w: %s: %v", errStep, title, err)
	}
	r.shown = map[string]Tool{}
	for _, t := range tools {
		if _, dup := r.shown[t.CapabilityID]; !dup {
			r.shown[t.CapabilityID] = t
		}
	}
	var missing []string
	for _, id := range want {
		if _, ok := r.shown[id]; !ok {
			missing = append(missing, id)
		}
	}
	step := Step{Title: title, Tool: "tools/list", Outcome: "ok", Want: "ok", Detail: fmt.Sprintf("%d tools", len(tools)), Duration: d}
	if len(missing) > 0 {
		step.Outcome, step.Detail = "missing-tools", "missing "+strings.Join(missing, ", ")
	}
	r.emit(step)
	if !step.Expected() {
		return fmt.Errorf("%w: %s: %s", errStep, title, step.Detail)
	}
	return nil
}

// call calls the tool of capability id from the last discovery.
func (r *run) call(ctx context.Context, title, id string, args any, want string) (surface.Result, error) {
	t, ok := r.shown[id]
	if !ok {
		return surface.Result{}, r.fail(title, "no tool for "+id)
	}
	return r.callTool(ctx, title, t, args, want)
}

// callTool calls t and checks the outcome.
func (r *run) callTool(ctx context.Context, title string, t Tool, args any, want string) (surface.Result, error) {
	var raw json.RawMessage
	if args != nil {
		raw = mustJSON(args)
	}
	start := r.now()
	res, err := r.tools.Call(ctx, t.Name, raw)
	d := r.now().Sub(start)
	step := Step{Title: title, Tool: t.Name, Args: raw, Want: want, Duration: d}
	if err != nil {
		step.Outcome, step.Detail = "error", err.Error()
		r.emit(step)
		return res, fmt.Errorf("%w: %s: %v", errStep, title, err)
	}
	step.Outcome = Outcome(res)
	step.Detail = detail(res)
	r.emit(step)
	if !step.Expected() {
		return res, fmt.Errorf("%w: %s: got %s, want %s", errStep, title, step.Outcome, want)
	}
	return res, nil
}

// fail reports a failed check of an earlier step's result.
func (r *run) fail(title, why string) error {
	r.emit(Step{Title: title, Outcome: "unexpected", Want: "as expected", Detail: why})
	return fmt.Errorf("%w: %s: %s", errStep, title, why)
}

func (r *run) emit(s Step) {
	r.n++
	s.N = r.n
	r.report(s)
}

// detail is a one-line note on a result: the error's message, or the
// output, after the grant that let the call through unasked, if one did.
func detail(res surface.Result) string {
	if g := res.GrantID; g != "" {
		res.GrantID = ""
		return "no question asked: allowed by " + g + "; " + detail(res)
	}
	if res.Error != nil {
		if reason := res.Error.Reason(); reason != "" {
			return res.Error.Message + " (" + string(reason) + ")"
		}
		return res.Error.Message
	}
	s := string(res.Output)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// planSite picks the site whose offline devices the task disables:
// preferred if two of its devices are offline, else the site with the
// most offline devices (the first by name among equals), at least two.
// note says what was chosen and why.
func planSite(rows []tableRow, preferred string) (site, note string, err error) {
	offline := map[string]int{}
	var sites []string
	for _, row := range rows {
		if !slices.Contains(sites, row.Site) {
			sites = append(sites, row.Site)
		}
		if row.Status == "offline" {
			offline[row.Site]++
		}
	}
	slices.Sort(sites)
	if offline[preferred] >= 2 {
		return preferred, fmt.Sprintf("%d offline devices in %s", offline[preferred], preferred), nil
	}
	best := ""
	for _, s := range sites {
		if offline[s] > offline[best] {
			best = s
		}
	}
	if offline[best] < 2 {
		counts := make([]string, 0, len(sites))
		for _, s := range sites {
			counts = append(counts, fmt.Sprintf("%s %d", s, offline[s]))
		}
		return "", "", fmt.Errorf("%w: offline devices per site: %s; an earlier run disabled them: start from the seed again (agentsurface demo --reset)",
			ErrNothingToDo, strings.Join(counts, ", "))
	}
	return best, fmt.Sprintf("%s has %d offline devices left, %s has %d: using %s", preferred, offline[preferred], best, offline[best], best), nil
}

// tableState is the part of the table's readState output the task reads.
type tableState struct {
	Rows    []tableRow `json:"rows"`
	Filters struct {
		Site   string `json:"site"`
		Status string `json:"status"`
	} `json:"filters"`
}

type tableRow struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Site   string `json:"site"`
	Status string `json:"status"`
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps of strings are passed
	}
	return b
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
