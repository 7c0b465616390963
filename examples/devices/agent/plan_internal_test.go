package agent

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// planSite plans from what the table shows: the preferred site when two
// of its devices are offline, else the site with the most offline devices
// (at least two), else an error that says what it found and that --reset
// starts again from the seed.
func TestPlanSiteProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sites := []string{"Amsterdam", "Berlin", "Frankfurt", "London"}
		rows := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) tableRow {
			return tableRow{Site: rapid.SampledFrom(sites).Draw(t, "site"), Status: rapid.SampledFrom([]string{"online", "offline", "disabled"}).Draw(t, "status")}
		}), 0, 20).Draw(t, "rows")
		preferred := rapid.SampledFrom(sites).Draw(t, "preferred")
		offline := map[string]int{}
		most := 0
		for _, r := range rows {
			if r.Status == "offline" {
				offline[r.Site]++
				most = max(most, offline[r.Site])
			}
		}
		site, note, err := planSite(rows, preferred)
		switch {
		case most < 2:
			if !errors.Is(err, ErrNothingToDo) || !strings.Contains(err.Error(), "--reset") {
				t.Fatalf("no site has two offline devices (%v), got %q %v", offline, site, err)
			}
		case err != nil:
			t.Fatalf("%v: %v", offline, err)
		case offline[preferred] >= 2 && site != preferred:
			t.Fatalf("%s has %d offline devices, chose %s", preferred, offline[preferred], site)
		case offline[site] != most && site != preferred:
			t.Fatalf("chose %s (%d) though %d is the most", site, offline[site], most)
		case !strings.Contains(note, site):
			t.Fatalf("the note %q does not name %s", note, site)
		}
	})
}
