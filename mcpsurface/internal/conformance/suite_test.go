package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// suiteEnv asks for TestOfficialSuite, which downloads the official
// conformance suite from npm and needs Node.js 22 or later on PATH
// (.ci/run installs it and sets the variable): go test stays hermetic
// without it.
const suiteEnv = "AGENTSURFACE_CONFORMANCE"

var update = flag.Bool("update", false, "rewrite testdata/expected.json with the results of TestOfficialSuite")

// suites are the pinned releases of the official suite, one per protocol
// revision: 0.1.16 is the stable release for 2025-11-25; the 0.2.0
// alphas add 2026-07-28, whose scenarios run with --requirements.
var suites = []struct {
	version string
	pkg     string
	args    []string
}{
	{"2025-11-25", "@modelcontextprotocol/conformance@0.1.16", []string{"--spec-version", "2025-11-25"}},
	{"2026-07-28", "@modelcontextprotocol/conformance@0.2.0-alpha.12", []string{"--requirements", "2026-07-28"}},
}

// tally is the number of passed and failed checks of a scenario.
type tally struct {
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// results are, per run ("stateful/2025-11-25"), the tally of every
// scenario.
type results map[string]map[string]tally

const expectedFile = "testdata/expected.json"

// The official MCP conformance suite, run against the conformance server
// in both handler modes (the default handler, which serves older clients
// stateful sessions, and HTTPOptions.Stateless) at both protocol
// revisions; no scenario may regress from testdata/expected.json (fewer
// passed or more failed checks). Run it with
//
//	AGENTSURFACE_CONFORMANCE=1 go test ./mcpsurface/internal/conformance -run TestOfficialSuite
//
// and rewrite the expectations with -update.
func TestOfficialSuite(t *testing.T) {
	if os.Getenv(suiteEnv) != "1" {
		t.Skip("the official conformance suite is downloaded from npm and needs Node.js 22; run it with " +
			suiteEnv + "=1 go test ./mcpsurface/internal/conformance -run TestOfficialSuite (.ci/run does)")
	}
	npx := requireNode22(t)
	got := results{}
	for _, mode := range []struct {
		name      string
		stateless bool
	}{{"stateful", false}, {"stateless", true}} {
		url := serve(t, mode.stateless)
		for _, s := range suites {
			run := mode.name + "/" + s.version
			got[run] = runSuite(t, npx, s.pkg, url, s.args)
			t.Logf("%s: %s", run, summary(got[run]))
		}
	}
	if *update {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(expectedFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(expectedFile)
	if err != nil {
		t.Fatal(err)
	}
	var want results
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for _, line := range compare(want, got) {
		t.Error(line)
	}
}

// compare returns the regressions of got against want: a scenario gone,
// new, or with fewer passed or more failed checks.
func compare(want, got results) []string {
	var out []string
	for run, scenarios := range want {
		for name, w := range scenarios {
			g, ok := got[run][name]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s %s: not run (expected %d passed, %d failed)", run, name, w.Passed, w.Failed))
			case g.Passed < w.Passed || g.Failed > w.Failed:
				out = append(out, fmt.Sprintf("%s %s: %d passed, %d failed; expected %d passed, %d failed", run, name, g.Passed, g.Failed, w.Passed, w.Failed))
			}
		}
	}
	for run, scenarios := range got {
		for name := range scenarios {
			if _, ok := want[run][name]; !ok {
				out = append(out, fmt.Sprintf("%s %s: a scenario without expectations (update testdata with -update)", run, name))
			}
		}
	}
	slices.Sort(out)
	return out
}

func summary(r map[string]tally) string {
	var p, f, failing int
	for _, t := range r {
		p, f = p+t.Passed, f+t.Failed
		if t.Failed > 0 {
			failing++
		}
	}
	return fmt.Sprintf("%d scenarios, %d failing; %d checks passed, %d failed", len(r), failing, p, f)
}

// requireNode22 returns npx, failing the test unless Node.js 22 or later
// runs it.
func requireNode22(t *testing.T) string {
	t.Helper()
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Fatalf("%s=1 but npx is not on PATH: %v", suiteEnv, err)
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	major, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(strings.TrimSpace(string(out)), ".", 2)[0], "v"))
	if major < 22 {
		t.Fatalf("the conformance suite needs Node.js 22 or later; node is %s", out)
	}
	return npx
}

// scenarioDir is the name of the directory a scenario's results are
// saved in: server-<scenario>-<timestamp>.
var scenarioDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T`)

// runSuite runs one release of the suite against url and tallies its
// checks per scenario. The suite exits non-zero when a check fails; the
// tally is what counts.
func runSuite(t *testing.T, npx, pkg, url string, args []string) map[string]tally {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npx, append([]string{"-y", pkg, "server", "--url", url, "-o", dir}, args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	err := cmd.Run()
	entries, _ := os.ReadDir(dir)
	out := map[string]tally{}
	for _, e := range entries {
		m := scenarioDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		var checks []struct{ Status string }
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		var tl tally
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				tl.Passed++
			case "FAILURE":
				tl.Failed++
			}
		}
		out[m[1]] = tl
	}
	if len(out) == 0 {
		t.Fatalf("%s produced no results (%v):\n%s", pkg, err, output.Bytes())
	}
	return out
}
