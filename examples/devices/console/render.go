package console

// What the page shows, fragment by fragment. The page is one template;
// its live fragments (elements with an id and data-fragment) follow the
// session through the Host's event stream. Each change of the session
// says which fragments it touched (a part), and the stream renders only
// those, at most every 100ms, so that an agent's burst of calls costs a
// few renders of the fragments that show them, not a render of the whole
// page per call.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// part is a set of the page's live fragments.
type part uint16

// The live fragments, each the element of the id of one template of the
// same name. (The approvals card is the Host's fragment
// webhost.ApprovalsID, rendered by renderApprovals; the connection card
// does not change while the page shows.)
const (
	partHeader part = 1 << iota
	partTable
	partDetail
	partAgent
	partSurface
	partActivity
	partGrants

	partAll = partGrants<<1 - 1
	// partView is what a change of the view state touches: the table, the
	// detail panel, and the live notes of the bound procedures.
	partView = partTable | partDetail | partSurface
)

// fragments names the fragments by part, in page order.
var fragments = []struct {
	id   string
	part part
}{
	{"header", partHeader}, {"table", partTable}, {"detail", partDetail},
	{"agent", partAgent}, {"surface", partSurface}, {"activity", partActivity},
	{"grants", partGrants},
}

// Fragment renders the live fragment id (it is the webhost.Views of the
// session): the Host asks for those that changed names, and sends those
// whose HTML changed.
func (s *Session) Fragment(ctx context.Context, w io.Writer, id string) error {
	for _, f := range fragments {
		if f.id == id {
			return templates.ExecuteTemplate(w, id, s.pageData(ctx, f.part))
		}
	}
	return webhost.ErrNoFragment
}

// pageData is what the templates render; pageData fills the parts asked.
type pageData struct {
	Session   string
	User      domain.User
	Users     []domain.User
	Shown     bool
	KeepShown bool
	Table     tableData
	Detail    *DeviceDetail
	Activity  []template.HTML // rendered rows, newest first
	Agent     agentData
	Connect   connectData
	Surface   []surfaceRow
	Grants    []grantRow
	Version   string
	// Script includes the Host's page script, and Approvals is the
	// approvals card, on the page's first render.
	Script, Approvals template.HTML
}

type tableData struct {
	TableState
	Statuses []string
	Columns  []columnHead
	Error    string
}

type columnHead struct{ Key, Label, Arrow string }

type activityRow struct {
	At                                    string
	Event, What, Consumer, Outcome, Actor string
	Millis                                string
	Class                                 string
}

type agentData struct {
	Name    string
	Busy    bool
	Entries []ChatEntry
	// Scripted says that the agent plays a fixed task and ignores the
	// prompt.
	Scripted bool
}

type connectData struct {
	URL, Token, Claude, Inspector, CLI string
	// Inspector's Node.js requirement.
	InspectorNode string
}

// surfaceRow is one capability on the Live surface card, as
// Registry.Explain explains it for the page's agent: its outcome, why,
// and the policies that judged it.
type surfaceRow struct {
	ID, Reason, Note string
	Outcome          surface.Visibility
	Policies         []string // the policies that hide or disable it: "name (layer): vote"
}

func (s *Session) pageData(ctx context.Context, parts part) pageData {
	s.mu.Lock()
	d := pageData{Session: s.ID(), User: s.user, Users: users}
	open := s.view.detail
	s.mu.Unlock()
	d.Shown, d.KeepShown = s.ws.Shown(), s.keepShown()

	if parts&partTable != 0 {
		d.Table = s.tableData(ctx)
	}
	if parts&partDetail != 0 && open != "" {
		if dd, err := s.deviceDetail(ctx, open); err == nil {
			d.Detail = &dd
		}
	}
	if parts&partActivity != 0 {
		d.Activity = s.activityHTML(40)
	}
	if parts&partGrants != 0 {
		d.Grants = s.grantRows()
	}
	if parts&partAgent != 0 {
		d.Agent = agentData{Name: s.app.opts.AgentName, Busy: s.agent().busy(), Entries: s.Chat(), Scripted: s.agent().scripted()}
		if n := len(d.Agent.Entries); n > 30 {
			d.Agent.Entries = d.Agent.Entries[n-30:]
		}
	}
	if parts&(partSurface|partHeader) != 0 {
		d.Surface, d.Version = s.surfaceRows(parts&partSurface != 0)
	}
	return d
}

// tableData is the devices table as the page shows it.
func (s *Session) tableData(ctx context.Context) tableData {
	t := tableData{Statuses: statuses}
	if st, err := s.tableState(ctx); err != nil {
		t.Error = "The devices could not be read."
	} else {
		t.TableState = st
	}
	for _, c := range [][2]string{{"name", "Name"}, {"site", "Site"}, {"status", "Status"}, {"lastSeen", "Last seen"}} {
		h := columnHead{Key: c[0], Label: c[1]}
		if t.Sort.Column == c[0] {
			h.Arrow = " ▲"
			if t.Sort.Direction == "desc" {
				h.Arrow = " ▼"
			}
		}
		t.Columns = append(t.Columns, h)
	}
	return t
}

// InspectorPackage is the MCP Inspector the page and the README tell
// people to run: a 2.x release, the first with --header (the 0.x a bare
// npx resolves on Node 20 cannot send the bearer token).
const InspectorPackage = "@modelcontextprotocol/inspector@2.12.0"

// InspectorNode is the Node.js that InspectorPackage needs.
const InspectorNode = "Node.js ≥ 22.19"

// InspectorCommand is the MCP Inspector command line (InspectorPackage,
// which needs InspectorNode) that lists the tools of the MCP endpoint url
// with token.
func InspectorCommand(url, token string) string {
	return fmt.Sprintf(`npx -y %s --cli %s --transport http --header "Authorization: Bearer %s" --method tools/list`, InspectorPackage, url, token)
}

// connectCommands are the commands the page prints for connecting to
// the session's MCP endpoint at base.
func connectCommands(base, token string) connectData {
	url := base + "/mcp"
	return connectData{
		URL: url, Token: token, InspectorNode: InspectorNode,
		Claude:    fmt.Sprintf(`claude mcp add --transport http devices %s --header "Authorization: Bearer %s"`, url, token),
		Inspector: InspectorCommand(url, token),
		CLI:       fmt.Sprintf(`go run ./cmd/agentsurface inspect %s --token %s`, url, token),
	}
}

// surfaceRows explains the surface for the page's agent (only the
// version when rows is false). The card explains the surface rather than
// listing the snapshot, so that a capability a policy hides shows up,
// struck out, with the policy that hid it; the snapshot adds the
// procedures' live notes.
func (s *Session) surfaceRows(rows bool) ([]surfaceRow, string) {
	snap := s.Registry().Snapshot(surface.SnapshotOptions{Consumer: ConsoleConsumer})
	if !rows {
		return nil, snap.SurfaceVersion
	}
	notes := map[string]string{}
	for _, p := range snap.Procedures {
		notes[p.RegistrationID+" "+p.ProcedureID] = p.ContextualNote
	}
	var out []surfaceRow
	for _, c := range s.Registry().Explain(surface.SnapshotOptions{Consumer: ConsoleConsumer}).Capabilities {
		row := surfaceRow{ID: c.CapabilityID, Outcome: c.Outcome, Reason: c.Reason}
		// The live note says what the procedure acts on; an unavailable
		// one already says why in its reason (the note would repeat it).
		if c.Outcome != surface.VisibilityUnavailable {
			row.Note = notes[c.RegistrationID+" "+c.CapabilityID]
		}
		if c.Kind != surface.KindProcedure && c.InstanceID != "main" {
			row.ID += " @" + c.InstanceID
		}
		for _, p := range c.Policies {
			if p.Vote == "hide" || p.Vote == "disable" {
				row.Policies = append(row.Policies, p.Name+" ("+string(p.Layer)+"): "+p.Vote)
			}
		}
		out = append(out, row)
	}
	return out, snap.SurfaceVersion
}

// approvalCard is the card of a pending confirmation: the exact input,
// with the devices by name.
type approvalCard struct {
	ID, Summary, Capability, Consumer, Reason, Input string
	Devices                                          []string
	ExpiresAt                                        time.Time
	// Grant is the standing grant the card offers with an approval, as
	// the approve page does; nil when the capability allows none.
	Grant *grantOfferCard
}

// decisionRow is a decision and what became of it: an approval is not
// the outcome; the call it let through may still fail.
type decisionRow struct {
	Decision
	Result, Class string
}

// approvalsData is what the approvals card shows.
type approvalsData struct {
	Action    string
	Approvals []approvalCard
	Decisions []decisionRow
}

// renderApprovals renders the approvals fragment (the Host's
// Options.RenderApprovals): the console's card, which names the devices.
func (a *App) renderApprovals(w io.Writer, ws *webhost.Session, ap webhost.Approvals) error {
	s := viewsOf(ws)
	d := approvalsData{Action: ap.Action}
	for _, p := range ap.Pending {
		c := s.card(p)
		c.Grant = s.offerCard(ap.Offers[p.ConfirmationID])
		d.Approvals = append(d.Approvals, c)
	}
	for _, dec := range ap.Decisions { // newest first
		d.Decisions = append(d.Decisions, decisionRowOf(dec))
	}
	return templates.ExecuteTemplate(w, "approvals", d)
}

// card is the approval card of a pending confirmation: the exact input,
// with the devices by name.
func (s *Session) card(p surface.PendingConfirmation) approvalCard {
	c := approvalCard{ID: p.ConfirmationID, Summary: p.Summary, Capability: p.CapabilityID, Consumer: p.ConsumerKey, ExpiresAt: p.ExpiresAt}
	var in struct {
		IDs    []string `json:"ids"`
		Reason string   `json:"reason"`
	}
	if json.Unmarshal([]byte(p.Input), &in) == nil {
		for _, id := range in.IDs {
			c.Devices = append(c.Devices, s.nameOf(id)+" ("+id+")")
		}
		c.Reason = in.Reason
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, []byte(p.Input), "", "  ") == nil {
		c.Input = pretty.String()
	} else {
		c.Input = string(p.Input)
	}
	return c
}

// decisionRowOf says what became of a decision: for an approval, the
// outcome of the call that presented it, once it ran; an expired request
// says so.
func decisionRowOf(d Decision) decisionRow {
	r := decisionRow{Decision: d}
	switch {
	case d.Outcome == surface.OutcomeExpired:
		r.Result, r.Class = "expired before anyone decided: nothing ran", "failed"
	case d.Outcome == surface.OutcomeDenied:
		r.Result, r.Class = "nothing ran", "failed"
	case d.Call == nil:
		r.Result, r.Class = "the call has not run yet", "pending"
	case !d.Call.Settled:
		r.Result, r.Class = "running", "pending"
	case d.Call.Code == surface.CodeNotAuthorized:
		r.Result, r.Class = "refused by the domain service: NOT_AUTHORIZED", "failed"
	case d.Call.Code != "":
		r.Result, r.Class = "refused: "+string(d.Call.Code), "failed"
	default:
		r.Result, r.Class = "done", "good"
	}
	return r
}

// activityHTML renders the newest n lines of the Activity card. An entry
// is rendered once and kept, by its number, while it is among the lines
// shown: a read adds one line to render, not forty. (Approvals are
// rendered every time: they show what became of the call.)
func (s *Session) activityHTML(n int) []template.HTML {
	var out []template.HTML
	keep := make(map[uint64]template.HTML, n)
	var buf bytes.Buffer
	for _, e := range s.activity.newestFirst() {
		if len(out) == n {
			break
		}
		if e.Type == surface.AuditInvocationStarted {
			continue // its settlement says it all
		}
		s.mu.Lock()
		html, ok := s.rowCache[e.seq]
		s.mu.Unlock()
		if !ok {
			buf.Reset()
			if err := templates.ExecuteTemplate(&buf, "activity-row", s.feedRow(e)); err != nil {
				s.app.log.Error("console: render", "fragment", "activity-row", "error", err)
				continue
			}
			html = template.HTML(buf.String()) // rendered by html/template
			if e.Type == surface.AuditConfirmationApproved {
				out = append(out, html)
				continue
			}
		}
		keep[e.seq] = html
		out = append(out, html)
	}
	s.mu.Lock()
	s.rowCache = keep
	s.mu.Unlock()
	return out
}

// events names the audit record types as the Activity card shows them.
var events = map[surface.AuditType]string{
	surface.AuditRegistration:          "mounted",
	surface.AuditUnregistration:        "unmounted",
	surface.AuditRegistrationRejected:  "mount refused",
	surface.AuditInvocationSettled:     "call",
	surface.AuditConfirmationRequested: "approval asked",
	surface.AuditConfirmationApproved:  "approved",
	surface.AuditConfirmationDenied:    "denied",
	surface.AuditConfirmationExpired:   "approval expired",
	surface.AuditConfirmationConsumed:  "approval used",
	surface.AuditLateSettlement:        "late result",
	surface.AuditCollisionSuspected:    "name collision",
	surface.AuditGrantCreated:          "grant made",
	surface.AuditGrantRefused:          "grant refused",
	surface.AuditGrantUsed:             "grant used",
	surface.AuditGrantRevoked:          "grant revoked",
	surface.AuditGrantExpired:          "grant ended",
	webhost.AuditApproveRefused:        "approve page refused",
}

func (s *Session) feedRow(e feedEntry) activityRow {
	r := activityRow{At: e.At.Format("15:04:05"), Event: events[e.Type], What: e.CapabilityID, Consumer: e.ConsumerID, Actor: e.Actor}
	if r.Event == "" {
		r.Event = string(e.Type)
	}
	if e.read || e.Type == surface.AuditInvocationSettled && isRead(e.CapabilityID) {
		r.Event = "read" // also one that failed before reaching the component, which is audited
	}
	if r.What == "" {
		// A registration: the component, once its event named it.
		r.What = cmp.Or(e.component, "registration "+e.RegistrationID)
	}
	switch {
	case e.Code == surface.CodeConfirmationRequired:
		r.Outcome, r.Class = string(e.Code), "pending"
	case e.Code != "":
		r.Outcome, r.Class = string(e.Code), "failed"
	case e.Status != "":
		r.Outcome = string(e.Status)
		if e.Status == surface.StatusOK {
			r.Class = "good"
		}
	}
	switch e.Type {
	case surface.AuditConfirmationApproved:
		// Approving is not the outcome: say what became of the call.
		r.Outcome, r.Class = "approved", "pending"
		for _, d := range s.Decisions() {
			if d.ConfirmationID == e.ConfirmationID && d.Outcome == surface.OutcomeApproved {
				dr := decisionRowOf(d)
				r.Outcome, r.Class = "approved → "+dr.Result, dr.Class
			}
		}
	case surface.AuditConfirmationDenied, surface.AuditConfirmationExpired:
		r.Outcome, r.Class = strings.TrimPrefix(string(e.Type), "confirmation-"), "failed"
	case surface.AuditConfirmationRequested:
		r.Outcome, r.Class = "waiting for you", "pending"
	case surface.AuditGrantCreated, surface.AuditGrantUsed, surface.AuditGrantRevoked, surface.AuditGrantExpired:
		r.Outcome = e.GrantID
	case surface.AuditGrantRefused, webhost.AuditApproveRefused:
		r.Outcome, r.Class = e.Reason, "failed"
	}
	if e.Type == surface.AuditInvocationSettled && e.GrantID != "" {
		r.Outcome += " · allowed by " + e.GrantID // no one was asked: a standing grant let it through
	}
	if e.DurationMs != nil {
		r.Millis = strconv.FormatInt(*e.DurationMs, 10)
	}
	return r
}

// breakable is s, escaped, with a line break opportunity after each _ . :
// and -, so that ids and codes (CONFIRMATION_REQUIRED,
// view:devices.table.readState) wrap between their words in a narrow
// column instead of inside them.
func breakable(s string) template.HTML {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(template.HTMLEscapeString(string(r)))
		if r == '_' || r == '.' || r == ':' || r == '-' {
			b.WriteString("<wbr>")
		}
	}
	return template.HTML(b.String()) // escaped above
}

// ago formats how long ago t was, coarsely.
func ago(t any) string {
	var at time.Time
	switch v := t.(type) {
	case time.Time:
		at = v
	case string:
		p, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return v
		}
		at = p
	}
	d := time.Since(at)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return at.UTC().Format("2006-01-02")
}
