package console

import (
	"context"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"pgregory.net/rapid"
)

// Whatever the page and agents do to the table, the selection has no
// duplicates, only visible rows stay selected once the rows are read, and
// the availability of the bound procedures that agents were last told
// (pushed by Refresh, as MCP tool lists follow it) matches the selection.
// AS-AVAIL-001, AS-BIND-004, AS-VER-001.
func TestSelectionProperties(t *testing.T) {
	app := newTestApp(t)
	ctx := context.Background()
	ids := []string{"d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11", "d12"}
	s, err := app.NewSession(SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts, err := surface.NewToolset(s.Registry(), surface.ToolsetOptions{Topology: surface.TopologyRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	var mu sync.Mutex
	var told []surface.Tool // what a subscriber was last told
	ts.Subscribe(func(c *surface.Catalog) { mu.Lock(); told = c.Tools(); mu.Unlock() })
	rapid.Check(t, func(rt *rapid.T) {
		// Each case starts from an empty selection and no filter.
		s.clearSelection()
		if err := s.setFilter(ctx, Filters{}); err != nil {
			rt.Fatal(err)
		}
		mu.Lock()
		told = ts.Tools()
		mu.Unlock()

		for range rapid.IntRange(1, 25).Draw(rt, "ops") {
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0:
				f := Filters{
					Site:   rapid.SampledFrom([]string{"", "London", "amsterdam", "Berlin", "Frankfurt"}).Draw(rt, "site"),
					Status: rapid.SampledFrom([]string{"", "online", "offline", "disabled"}).Draw(rt, "status"),
				}
				if err := s.setFilter(ctx, f); err != nil {
					rt.Fatal(err)
				}
			case 1:
				pick := rapid.SliceOfDistinct(rapid.SampledFrom(ids), rapid.ID).Draw(rt, "ids")
				s.selectRows(pick, rapid.SampledFrom([]string{"", "add", "remove"}).Draw(rt, "mode"))
			case 2:
				s.toggleRow(rapid.SampledFrom(ids).Draw(rt, "id"))
			case 3:
				s.clearSelection()
			case 4:
				if _, err := s.rows(ctx); err != nil {
					rt.Fatal(err)
				}
			}
			s.mu.Lock()
			sel := slices.Clone(s.view.selection)
			s.mu.Unlock()
			if len(slices.Compact(slices.Sorted(slices.Values(sel)))) != len(sel) {
				rt.Fatalf("duplicates in %v", sel)
			}
			mu.Lock()
			last := told
			mu.Unlock()
			for _, tool := range last {
				if (tool.CapabilityID == domain.DisableID || tool.CapabilityID == domain.EnableID) && tool.State.Available != (len(sel) > 0) {
					rt.Fatalf("%s told available=%v with selection %v", tool.CapabilityID, tool.State.Available, sel)
				}
			}
		}
		rows, err := s.rows(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, id := range s.view.selection {
			if !slices.ContainsFunc(rows, func(r Row) bool { return r.ID == id && r.Selected }) {
				rt.Fatalf("%s selected but not a visible row", id)
			}
		}
	})
}

// The page's form handler takes any action and values without panicking,
// and answers with a status from its small set.
func FuzzForm(f *testing.F) {
	app := newTestApp(f)
	s, err := app.NewSession(SessionOptions{KeepShown: true})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][2]string{
		{"filter", "site=London&status=offline"}, {"sort", "column=name"}, {"toggle", "id=d9"}, {"open", "id=d4"},
		{"close", ""}, {"clear", ""}, {"user", "id=victor"}, {"filter", "status=%ff"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, action, query string) {
		if action == "ask" { // starts the embedded agent: covered elsewhere
			return
		}
		values, _ := url.ParseQuery(query)
		code, _ := s.handleForm(context.Background(), action, values)
		if !slices.Contains([]int{200, 400, 404, 409, 500, 503}, code) {
			t.Fatalf("%s %q: status %d", action, query, code)
		}
	})
}

// A freshly mounted table tells agents when its bound procedures become
// available: the first selection after mounting flips them, and
// subscribers (MCP tool lists) hear of it. AS-AVAIL-001.
func TestAvailabilityPushedAfterMount(t *testing.T) {
	app := newTestApp(t)
	s, err := app.NewSession(SessionOptions{KeepShown: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts, err := surface.NewToolset(s.Registry(), surface.ToolsetOptions{Topology: surface.TopologyRemote})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	ts.Tools()
	told := make(chan []surface.Tool, 8)
	ts.Subscribe(func(c *surface.Catalog) { told <- c.Tools() })
	s.selectRows([]string{"d4"}, "")
	select {
	case tools := <-told:
		i := slices.IndexFunc(tools, func(x surface.Tool) bool { return x.CapabilityID == domain.DisableID })
		if i < 0 || !tools[i].State.Available || tools[i].State.Note != "1 device selected." {
			t.Fatalf("%+v", tools)
		}
	default:
		t.Fatal("selecting a row told agents nothing")
	}
}
