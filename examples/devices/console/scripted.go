package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentsurface/agentsurface/examples/devices/agent"
	"github.com/agentsurface/agentsurface/surface"
)

// ScriptedRun configures [Session.PlayScripted].
type ScriptedRun struct {
	// URL is the console's MCP endpoint ("http://127.0.0.1:8080/mcp").
	URL string
	// Approver, if set, has the run decide without a browser: the session's
	// user decides as a person would, on the approve page of the link the
	// agent was given (in a browser of the session: one that followed the
	// session's join link), approving the task's request with a standing
	// grant for these devices (the longest duration the page offers) and
	// denying any later request (a device the task did not ask for). The
	// page records the decision under the console's name for the user;
	// Approver names the headless user in the transcript. Where the
	// agent was given no link (the session has no join link, or the server
	// no approve link), Approver decides through the host API instead, as
	// that actor. Without Approver the run waits for the user's decision
	// in the page.
	Approver string
	// Waiting, if set, is told what the user is asked to approve when the
	// run starts waiting.
	Waiting func(summary string)
	// Report receives every step.
	Report func(agent.Step)
	// HTTPClient makes the MCP requests, and the headless user's. Default
	// http.DefaultClient.
	HTTPClient *http.Client
}

// ErrDenied: the user denied the scripted agent's task.
var ErrDenied = errors.New("console: the request was denied")

// PlayScripted runs the scripted agent against this session over MCP, as
// a remote agent would: a go-sdk client over HTTP with the session's
// token, two-phase confirmations, the approve link handed to the user.
// It returns nil when every step got the expected outcome.
func (s *Session) PlayScripted(ctx context.Context, run ScriptedRun) error {
	m, err := agent.Dial(ctx, run.URL, &agent.DialOptions{Token: s.Token(), HTTPClient: run.HTTPClient, Name: "scripted-agent"})
	if err != nil {
		return err
	}
	defer m.Close()
	a := &agent.Scripted{
		TwoPhase: true,
		AwaitApproval: func(ctx context.Context, ap agent.Approval) (agent.Decision, error) {
			if run.Approver != "" {
				return s.decideHeadless(ctx, run, ap)
			}
			if run.Waiting != nil {
				run.Waiting(ap.Summary)
			}
			switch s.AwaitDecision(ctx, ap.ConfirmationID) {
			case surface.OutcomeApproved:
				d := agent.Decision{Approved: true, Note: "approved in the page"}
				if g := s.grantOf(ap.ConfirmationID); g != "" {
					d.GrantID, d.Note = g, "approved in the page, with the standing grant "+g
				}
				return d, nil
			case surface.OutcomeDenied:
				if ap.N == 1 {
					return agent.Decision{}, ErrDenied
				}
				return agent.Decision{Note: "denied in the page"}, nil
			}
			if ctx.Err() != nil {
				return agent.Decision{}, ctx.Err()
			}
			return agent.Decision{}, errors.New("console: the request expired before anyone decided")
		},
	}
	return a.Run(ctx, "", m, run.Report)
}

// grantOf returns the active standing grant made with the approval of
// confirmation id, or "".
func (s *Session) grantOf(id string) string {
	for _, g := range s.Registry().Grants().List() {
		if g.ConfirmationID == id {
			return g.GrantID
		}
	}
	return ""
}

// decideHeadless decides the request ap as ScriptedRun.Approver says:
// on the approve page of the agent's link, or through the host API when
// there is no link.
func (s *Session) decideHeadless(ctx context.Context, run ScriptedRun, ap agent.Approval) (agent.Decision, error) {
	approve := ap.N == 1
	if ap.ApproveURL == "" || s.JoinPath() == "" {
		if _, ok := s.Decide(ap.ConfirmationID, approve, run.Approver); !ok {
			return agent.Decision{}, fmt.Errorf("console: confirmation %s is not pending", ap.ConfirmationID)
		}
		return agent.Decision{Approved: approve, Note: verb(approve) + " through the host API by " + run.Approver}, nil
	}
	b, err := newHeadlessBrowser(run)
	if err != nil {
		return agent.Decision{}, err
	}
	if code, body, err := b.do(ctx, http.MethodGet, s.JoinPath(), nil); err != nil || code != http.StatusSeeOther {
		return agent.Decision{}, fmt.Errorf("console: the headless user could not join the session: %d %v %.200s", code, err, body)
	}
	// The link's path on the console the agent reaches: PublicURL may
	// name a balancer this process cannot.
	link, err := url.Parse(ap.ApproveURL)
	if err != nil {
		return agent.Decision{}, err
	}
	code, page, err := b.do(ctx, http.MethodGet, link.RequestURI(), nil)
	if err != nil || code != http.StatusOK || !strings.Contains(page, `data-state="ask"`) {
		return agent.Decision{}, fmt.Errorf("console: the approve page did not ask: %d %v %.200s", code, err, page)
	}
	form := url.Values{"decision": {"deny"}}
	minutes := 0
	if approve {
		form.Set("decision", "approve")
		for _, m := range minutesRe.FindAllStringSubmatch(page, -1) {
			if n, err := strconv.Atoi(m[1]); err == nil && n > minutes {
				minutes = n
			}
		}
		if minutes > 0 {
			form.Set("decision", "grant")
			form.Set("minutes", strconv.Itoa(minutes))
		}
	}
	code, page, err = b.do(ctx, http.MethodPost, link.RequestURI(), form)
	if err != nil || code != http.StatusOK || !strings.Contains(page, `data-state="decided"`) {
		return agent.Decision{}, fmt.Errorf("console: the approve page did not decide: %d %v %.200s", code, err, page)
	}
	d := agent.Decision{Approved: approve, Note: verb(approve) + " on the approve page by " + run.Approver}
	if m := grantRe.FindStringSubmatch(page); m != nil {
		d.GrantID = m[1]
		d.Note += fmt.Sprintf(", allowing it for %d minutes for these devices (%s)", minutes, d.GrantID)
	}
	return d, nil
}

func verb(approve bool) string {
	if approve {
		return "approved"
	}
	return "denied"
}

var (
	// minutesRe finds the durations the approve page offers.
	minutesRe = regexp.MustCompile(`<option value="(\d+)">\d+ minutes</option>`)
	// grantRe finds the grant the approve page made.
	grantRe = regexp.MustCompile(`data-grant="(gnt_[0-9A-Za-z]+)"`)
)

// headlessBrowser is the headless user's browser: a cookie jar on the
// origin of the MCP endpoint, which does not follow redirects.
type headlessBrowser struct {
	origin string
	client *http.Client
}

func newHeadlessBrowser(run ScriptedRun) (*headlessBrowser, error) {
	u, err := url.Parse(run.URL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("console: ScriptedRun.URL %q is not absolute", run.URL)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{}
	if run.HTTPClient != nil {
		*c = *run.HTTPClient
	}
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &headlessBrowser{origin: u.Scheme + "://" + u.Host, client: c}, nil
}

// do sends a request for path (a form post when form is set) as a
// browser on the page's origin does, and returns the answer.
func (b *headlessBrowser) do(ctx context.Context, method, path string, form url.Values) (int, string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, b.origin+path, body)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := b.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	page, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, string(page), err
}
