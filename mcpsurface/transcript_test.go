package mcpsurface_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The wire of this package is pinned by transcripts, as go-sdk pins its
// own (mcp/conformance_test.go): each testdata/*.txtar holds what a
// client sends, written by hand, and what the server answers, recorded.
// TestTranscripts replays the client's side against an HTTPHandler over
// in-memory HTTP (both protocol generations: stateful sessions at
// 2025-11-25, session-less requests at 2026-07-28), each in a synctest
// bubble, so that timers (confirmation expiry, the SDK's notification
// delay) run on the bubble's clock and every run sends the same bytes.
// Rewrite the server sections with
//
//	go test ./mcpsurface -run TestTranscripts -update
//
// and read the diff: it is the change of the wire.
//
// A transcript is a txtar archive: its comment says what it shows, and
// its files are
//
//   - setup (optional), one option per line: "stateless"
//     (HTTPOptions.Stateless), "max-sessions N", "meta" (meta mode),
//     "approve-url" (Options.ApproveURL gives
//     https://app.example/approve/<confirmation id>); "panel" and
//     "secret" mount the devices panel and devices.secret beside the
//     devices table;
//   - client: JSON-RPC messages, each POSTed as a request body, and
//     directives, lines that start with ">": "> client NAME" (later
//     messages come from the client NAME, with the credential
//     "Bearer tok-NAME" and a session of its own; every client is the
//     same user, consumer "ann", of the same registry; the first is "a"),
//     "> approve" and "> deny" (the user resolves every pending
//     confirmation in the application), "> remount" (the devices table is
//     registered again, replacing its registration), "> unmount" (it is
//     unregistered), "> hide" and "> show" (a policy hides
//     devices.secret, or shows it again, without a surface change),
//     "> sleep DURATION" (the bubble's clock advances), "> background"
//     (the next message's response is read in the background, as an
//     open stream, so that the client can go on while the server
//     waits: to answer the server's request on it, or for the person to
//     decide);
//   - server: what the server answered, in order: the messages of each
//     response, "> http STATUS" before those of a response whose status
//     is not the expected one (200, 202 for a notification), and
//     "> stream N" before what the N-th open stream (a
//     subscriptions/listen request, or a message sent after
//     "> background") delivered since.
//
// Random ids are replaced by placeholders, numbered in order of
// appearance: confirmation ids cnf_@1, the registry's invocation ids
// inv_@1, registration ids reg_@1, the
// invocation-id prefix of a server mcp_@1 (so mcp_@1_2 is its second
// invocation id), surface ids srf_@1, elicitation ids eli_@1, and the
// signed request states of input requests state_@1. A client message may use a
// placeholder the server has sent; it is sent as the id it stands for.
// Every HTTP request carries the headers a client derives from its
// message: the session id and negotiated version of its client
// (stateful), or MCP-Protocol-Version from the message's _meta,
// Mcp-Method and Mcp-Name (2026-07-28).
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ar := parseArchive(raw)
			client, ok := ar.file("client")
			if !ok {
				t.Fatal("no client section")
			}
			steps, err := parseItems(client)
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			setup, _ := ar.file("setup")
			var got []byte
			synctest.Test(t, func(t *testing.T) {
				got = replay(t, setup, steps)
			})
			if *update {
				ar.set("server", got)
				if err := os.WriteFile(file, ar.format(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, _ := ar.file("server")
			if !bytes.Equal(got, want) {
				t.Errorf("the server's answers differ from %s (run with -update to rewrite them):\n%s", file, lineDiff(want, got))
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the server sections of testdata/*.txtar with what the server answers")

// replay runs a transcript's client steps against a new handler and
// returns the server section it records. It runs in a synctest bubble.
func replay(t *testing.T, setup []byte, steps []item) []byte {
	opts := &mcpsurface.HTTPOptions{Options: mcpsurface.Options{
		// serverInfo.version is the module's build information
		// otherwise, which differs between builds.
		Implementation: &mcp.Implementation{Name: "agentsurface", Version: "test"},
	}}
	x := newTranscriptApp(t)
	for line := range strings.Lines(string(setup)) {
		switch f := strings.Fields(line); {
		case len(f) == 0:
		case f[0] == "panel":
			surfacetest.MustRegister(t, x.reg, x.app.domainPanel())
		case f[0] == "secret":
			x.mountSecret(t)
		case f[0] == "stateless":
			opts.Stateless = true
		case f[0] == "meta":
			opts.Mode = surface.ToolsetMeta
		case f[0] == "approve-url":
			opts.ApproveURL = func(_ context.Context, p surface.PendingConfirmation) string {
				return "https://app.example/approve/" + p.ConfirmationID
			}
		case f[0] == "max-sessions" && len(f) == 2:
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("setup: %q", line)
			}
			opts.MaxSessions = n
		default:
			t.Fatalf("setup: unknown option %q", line)
		}
	}
	h := mcpsurface.NewHTTPHandler(func(*http.Request) (*surface.Registry, surface.Consumer, error) {
		return x.reg, surface.Consumer{ID: "ann", Kind: surface.ConsumerMCPBridge}, nil
	}, opts)
	p := servePipe(h)
	r := &replayer{t: t, h: h, p: p, app: x, clients: map[string]*wireClient{}, ids: newScrubber()}
	r.cur = r.client("a")
	for _, st := range steps {
		if st.directive != nil {
			r.do(st.directive)
		} else {
			r.send(st.msg)
		}
		synctest.Wait()
		r.drain()
	}
	// What the streams receive as the handler closes (a listen stream's
	// final result, or none) is not part of a transcript.
	_ = h.Close()
	p.stop()
	return r.out.Bytes()
}

// transcriptApp is the application behind the transcripts: the devices
// table of fixtures_test.go and, if the setup asks, its panel and
// devices.secret, which a policy hides while hidden is set.
type transcriptApp struct {
	reg    *surface.Registry
	app    *app
	table  *surface.Handle
	hidden atomic.Bool
}

func newTranscriptApp(t *testing.T) *transcriptApp {
	x := &transcriptApp{}
	x.reg, x.app, x.table = newAppWith(t, &surface.Options{OnDuplicate: surface.DuplicateReplace})
	return x
}

func (x *transcriptApp) mountSecret(t *testing.T) {
	surfacetest.MustRegister(t, x.reg, surface.Component{Type: "devices.secret", Description: "Secret settings",
		Policies: []surface.Policy{{Name: "secret", Discover: func(*surface.PolicyContext) surface.Decision {
			if x.hidden.Load() {
				return surface.Hide()
			}
			return surface.Expose()
		}}},
		Observations: map[string]surface.Capability{"read": surfacetest.Value("The secret", "s3cr3t")}})
}

// replayer is the state of one replay.
type replayer struct {
	t       *testing.T
	h       *mcpsurface.HTTPHandler
	p       *pipeHTTP
	app     *transcriptApp
	clients map[string]*wireClient
	cur     *wireClient
	ids     *scrubber
	streams []*wireStream
	out     bytes.Buffer
	// background: the next message's response is read as a stream.
	background bool
}

// wireClient is what a client of a transcript knows: its credential, and
// its stateful session, if it opened one.
type wireClient struct {
	name    string
	sid     string
	version string // the version initialize negotiated
}

func (r *replayer) client(name string) *wireClient {
	c := r.clients[name]
	if c == nil {
		c = &wireClient{name: name}
		r.clients[name] = c
	}
	return c
}

// do runs a directive of the client section.
func (r *replayer) do(d []string) {
	t := r.t
	switch {
	case d[0] == "client" && len(d) == 2:
		r.cur = r.client(d[1])
	case d[0] == "approve" || d[0] == "deny":
		for _, pc := range r.app.reg.Confirmations().Pending() {
			if !r.app.reg.Confirmations().Resolve(pc.ConfirmationID, surface.Resolution{Approved: d[0] == "approve", Actor: "user"}) {
				t.Fatalf("> %s: %s is not pending", d[0], pc.ConfirmationID)
			}
		}
	case d[0] == "remount":
		r.app.table = surfacetest.MustRegister(t, r.app.reg, r.app.app.table("main"))
	case d[0] == "unmount":
		r.app.table.Unregister()
	case d[0] == "hide" || d[0] == "show":
		r.app.hidden.Store(d[0] == "hide")
	case d[0] == "background" && len(d) == 1:
		r.background = true
	case d[0] == "sleep" && len(d) == 2:
		dur, err := time.ParseDuration(d[1])
		if err != nil {
			t.Fatalf("> sleep: %v", err)
		}
		time.Sleep(dur)
	default:
		t.Fatalf("unknown directive %q", strings.Join(d, " "))
	}
}

// send POSTs one message of the current client, with the headers its
// client derives from it, and records the answer. A subscriptions/listen
// request opens a stream, read in the background.
func (r *replayer) send(msg json.RawMessage) {
	t := r.t
	body := r.ids.restore(msg)
	m, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		t.Fatalf("client message %s: %v", msg, err)
	}
	req := r.request(m, body)
	if call, ok := m.(*jsonrpc.Request); (ok && call.Method == "subscriptions/listen") || r.background {
		r.background = false
		s := &wireStream{n: len(r.streams) + 1}
		r.streams = append(r.streams, s)
		go s.read(r.p.client, req)
		return
	}
	resp, err := r.p.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", msg, err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		r.cur.sid = sid
	}
	want := http.StatusOK
	if call, ok := m.(*jsonrpc.Request); !ok || !call.IsCall() {
		want = http.StatusAccepted
	}
	if resp.StatusCode != want {
		fmt.Fprintf(&r.out, "> http %d\n", resp.StatusCode)
	}
	msgs, err := readMessages(resp)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", msg, err)
	}
	for _, b := range msgs {
		if call, ok := m.(*jsonrpc.Request); ok && call.Method == "initialize" {
			var res struct {
				Result struct {
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"result"`
			}
			if json.Unmarshal(b, &res) == nil && res.Result.ProtocolVersion != "" {
				r.cur.version = res.Result.ProtocolVersion
			}
		}
		r.record(b)
	}
}

// request is the HTTP request a client sends for message m, body.
func (r *replayer) request(m jsonrpc.Message, body []byte) *http.Request {
	req, err := http.NewRequest(http.MethodPost, "http://pipe/mcp", bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer tok-"+r.cur.name)
	version := r.cur.version
	if r.cur.sid != "" {
		req.Header.Set("Mcp-Session-Id", r.cur.sid)
	}
	call, _ := m.(*jsonrpc.Request)
	if call != nil {
		if v := metaVersionOf(call.Params); v != "" {
			version = v
		}
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if call != nil && version >= v2026 {
		req.Header.Set("Mcp-Method", call.Method)
		var p struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		}
		_ = json.Unmarshal(call.Params, &p)
		switch call.Method {
		case "tools/call", "prompts/get":
			req.Header.Set("Mcp-Name", p.Name)
		case "resources/read":
			req.Header.Set("Mcp-Name", p.URI)
		}
	}
	return req
}

// metaVersionOf returns the protocol version in a request's _meta.
func metaVersionOf(params json.RawMessage) string {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	v, _ := p.Meta[mcp.MetaKeyProtocolVersion].(string)
	return v
}

// record appends one message the server sent to the server section.
func (r *replayer) record(b []byte) {
	var out bytes.Buffer
	if err := json.Indent(&out, r.ids.scrub(b), "", "\t"); err != nil {
		r.t.Fatalf("the server sent a message that is not JSON: %v\n%s", err, b)
	}
	out.WriteByte('\n')
	r.out.Write(out.Bytes())
}

// drain records what the open streams delivered since the last drain.
func (r *replayer) drain() {
	for _, s := range r.streams {
		s.mu.Lock()
		got := s.got
		s.got = nil
		s.mu.Unlock()
		if len(got) == 0 {
			continue
		}
		fmt.Fprintf(&r.out, "> stream %d\n", s.n)
		for _, b := range got {
			if strings.HasPrefix(string(b), "> ") {
				r.out.Write(b)
				continue
			}
			r.record(b)
		}
	}
}

// wireStream is a long-lived response (a subscriptions/listen stream),
// read in the background.
type wireStream struct {
	n  int
	mu sync.Mutex
	// got holds the messages delivered and not yet recorded, and
	// "> http STATUS\n" when the stream was refused.
	got [][]byte
}

func (s *wireStream) add(b []byte) {
	s.mu.Lock()
	s.got = append(s.got, b)
	s.mu.Unlock()
}

func (s *wireStream) read(c *http.Client, req *http.Request) {
	resp, err := c.Do(req)
	if err != nil {
		s.add([]byte("> error " + err.Error() + "\n"))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.add(fmt.Appendf(nil, "> http %d\n", resp.StatusCode))
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		if len(bytes.TrimSpace(b)) > 0 {
			s.add(b)
		}
		return
	}
	_ = events(resp.Body, func(data []byte) { s.add(data) })
}

// readMessages returns the JSON-RPC messages of a response: its JSON
// body, or the data of each event of its event stream.
func readMessages(resp *http.Response) ([][]byte, error) {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return nil, err
		}
		return [][]byte{b}, nil
	}
	var out [][]byte
	err := events(resp.Body, func(data []byte) { out = append(out, data) })
	return out, err
}

// events calls fn with the data of each event of an event stream; events
// without data (a stream's priming event) are skipped.
func events(body io.Reader, fn func(data []byte)) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 4<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				fn(data)
			}
			data = nil
		case strings.HasPrefix(line, "data:"):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	if len(data) > 0 {
		fn(data)
	}
	if err := sc.Err(); err != nil && !strings.Contains(err.Error(), "closed") {
		return err
	}
	return nil
}

// scrubber replaces the random ids a server sends by placeholders and
// back.
type scrubber struct {
	toPlaceholder map[string]string
	toActual      map[string]string
	next          map[string]int
}

func newScrubber() *scrubber {
	return &scrubber{toPlaceholder: map[string]string{}, toActual: map[string]string{}, next: map[string]int{}}
}

// randomIDs are the random ids a server sends, by prefix.
var randomIDs = []struct {
	prefix string
	re     *regexp.Regexp
}{
	{"cnf_", regexp.MustCompile(`cnf_[0-9A-Za-z]{12}`)},
	{"inv_", regexp.MustCompile(`inv_[0-9A-Za-z]{12}`)},
	{"reg_", regexp.MustCompile(`reg_[0-9A-Za-z]{10,}`)},
	{"mcp_", regexp.MustCompile(`mcp_[A-Z2-7]{26}`)},
	{"srf_", regexp.MustCompile(`srf_[0-9A-Za-z]{22}`)},
	{"eli_", regexp.MustCompile(`eli_[A-Z2-7]{26}`)},
	// A request state: base64url of {"v":1,…}, a dot, its HMAC-SHA256.
	{"state_", regexp.MustCompile(`eyJ2IjoxL[0-9A-Za-z_-]*\.[0-9A-Za-z_-]{43}`)},
}

var placeholder = regexp.MustCompile(`(cnf_|inv_|reg_|mcp_|srf_|eli_|state_)@[0-9]+`)

func (s *scrubber) scrub(b []byte) []byte {
	for _, id := range randomIDs {
		b = id.re.ReplaceAllFunc(b, func(actual []byte) []byte {
			p, ok := s.toPlaceholder[string(actual)]
			if !ok {
				s.next[id.prefix]++
				p = id.prefix + "@" + strconv.Itoa(s.next[id.prefix])
				s.toPlaceholder[string(actual)], s.toActual[p] = p, string(actual)
			}
			return []byte(p)
		})
	}
	return b
}

func (s *scrubber) restore(b []byte) []byte {
	return placeholder.ReplaceAllFunc(b, func(p []byte) []byte {
		if actual, ok := s.toActual[string(p)]; ok {
			return []byte(actual)
		}
		return p
	})
}

// item is one entry of a transcript section: a directive (the fields of
// a "> …" line) or a JSON-RPC message.
type item struct {
	directive []string
	msg       json.RawMessage
}

// parseItems reads a transcript section: JSON values, and directive
// lines between them. Lines that start with "#" are comments.
func parseItems(data []byte) ([]item, error) {
	var out []item
	var pending bytes.Buffer
	flush := func() error {
		dec := json.NewDecoder(bytes.NewReader(pending.Bytes()))
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			var compact bytes.Buffer
			_ = json.Compact(&compact, raw)
			out = append(out, item{msg: compact.Bytes()})
		}
		pending.Reset()
		return nil
	}
	for line := range strings.Lines(string(data)) {
		switch trimmed := strings.TrimSpace(line); {
		case strings.HasPrefix(trimmed, "#"):
		case strings.HasPrefix(trimmed, ">"):
			if err := flush(); err != nil {
				return nil, err
			}
			f := strings.Fields(strings.TrimPrefix(trimmed, ">"))
			if len(f) == 0 {
				return nil, fmt.Errorf("empty directive")
			}
			out = append(out, item{directive: f})
		default:
			pending.WriteString(line)
		}
	}
	return out, flush()
}

// archive is a txtar archive (golang.org/x/tools/txtar's format): a
// comment, then files, each introduced by a line "-- NAME --".
type archive struct {
	comment []byte
	files   []archiveFile
}

type archiveFile struct {
	name string
	data []byte
}

func parseArchive(b []byte) *archive {
	a := &archive{}
	var cur *[]byte = &a.comment
	for line := range strings.Lines(string(b)) {
		if name, ok := fileMarker(line); ok {
			a.files = append(a.files, archiveFile{name: name})
			cur = &a.files[len(a.files)-1].data
			continue
		}
		*cur = append(*cur, line...)
	}
	return a
}

// fileMarker reports whether line is "-- NAME --", and NAME.
func fileMarker(line string) (string, bool) {
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "-- ") || !strings.HasSuffix(line, " --") || len(line) < 7 {
		return "", false
	}
	return strings.TrimSpace(line[3 : len(line)-3]), true
}

func (a *archive) file(name string) ([]byte, bool) {
	for _, f := range a.files {
		if f.name == name {
			return f.data, true
		}
	}
	return nil, false
}

// set replaces the data of file name, or adds the file.
func (a *archive) set(name string, data []byte) {
	for i := range a.files {
		if a.files[i].name == name {
			a.files[i].data = data
			return
		}
	}
	a.files = append(a.files, archiveFile{name: name, data: data})
}

func (a *archive) format() []byte {
	var b bytes.Buffer
	b.Write(a.comment)
	for _, f := range a.files {
		fmt.Fprintf(&b, "-- %s --\n", f.name)
		b.Write(f.data)
		if len(f.data) > 0 && f.data[len(f.data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// lineDiff shows where got first differs from want, with some context.
func lineDiff(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	from := max(0, i-5)
	var b strings.Builder
	fmt.Fprintf(&b, "first difference at line %d of the server section\n--- want\n", i+1)
	for _, l := range w[from:min(len(w), i+10)] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	b.WriteString("+++ got\n")
	for _, l := range g[from:min(len(g), i+10)] {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}
