package console

// The page's views and what they let an agent do. Each view registers a
// component while it is on screen and unregisters it when it goes away;
// whenever its state changes, it calls Refresh on its handle so that
// availability (When) is re-evaluated and pushed to agents.
//
//   - Mount (and the end of its context): the page opens or closes;
//   - openDevice / closeDetail: the detail panel opens, navigates, closes;
//   - setFilter, sortBy, selectRows, clearSelection: the table's state
//     changes (from the page or from an agent, through the same methods).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/webhost"
)

// Filters select the devices the table shows. Empty fields select all.
type Filters struct {
	Site   string `json:"site"`
	Status string `json:"status"`
}

// Sorting orders the table.
type Sorting struct {
	// Column is name, site, status or lastSeen.
	Column string `json:"column"`
	// Direction is asc or desc.
	Direction string `json:"direction"`
}

// Row is one row of the devices table.
type Row struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Site     string `json:"site"`
	Status   string `json:"status"`
	LastSeen string `json:"lastSeen"`
	Selected bool   `json:"selected"`
}

// TableState is what an agent reads from the devices table.
type TableState struct {
	Filters   Filters  `json:"filters"`
	Sort      Sorting  `json:"sort"`
	Rows      []Row    `json:"rows"`
	Selection []string `json:"selection"`
	// Sites are the values the site filter takes.
	Sites []string `json:"sites"`
}

// SelectRowsInput is the input of selectRows.
type SelectRowsInput struct {
	IDs []string `json:"ids"`
	// Mode is replace (default), add or remove.
	Mode string `json:"mode,omitempty"`
}

// OpenDeviceInput is the input of openDevice.
type OpenDeviceInput struct {
	ID string `json:"id"`
}

// DeviceDetail is what an agent reads from a detail panel.
type DeviceDetail struct {
	Device  domain.Device   `json:"device"`
	History []domain.Change `json:"history"`
}

var (
	statuses = []string{string(domain.StatusOnline), string(domain.StatusOffline), string(domain.StatusDisabled)}
	columns  = []string{"name", "site", "status", "lastSeen"}
)

// Input schemas with enums (inference gives plain strings).
var (
	selectRowsSchema = []byte(`{"type":"object","properties":{
		"ids":{"type":"array","items":{"type":"string","minLength":1,"maxLength":64},"maxItems":100,"description":"Device ids, as readState lists them; only visible rows can be selected."},
		"mode":{"type":"string","enum":["replace","add","remove"],"description":"replace (default) the selection, add to it or remove from it."}},
		"required":["ids"],"additionalProperties":false}`)
	setFilterSchema = []byte(`{"type":"object","properties":{
		"site":{"type":"string","maxLength":100,"description":"Only devices at this site (readState lists the sites); empty for all."},
		"status":{"type":"string","enum":["","online","offline","disabled"],"description":"Only devices with this status; empty for all."}},
		"additionalProperties":false}`)
	sortBySchema = []byte(`{"type":"object","properties":{
		"column":{"type":"string","enum":["name","site","status","lastSeen"]},
		"direction":{"type":"string","enum":["asc","desc"],"description":"asc (default) or desc."}},
		"required":["column"],"additionalProperties":false}`)
	openDeviceSchema = []byte(`{"type":"object","properties":{
		"id":{"type":"string","minLength":1,"maxLength":64,"description":"The device id."}},
		"required":["id"],"additionalProperties":false}`)
)

// DisableGrants is the ceiling of the standing grants a person may give
// with an approval of devices.disable ("approve, and allow this for N
// minutes for these devices"): at most 15 minutes and 10 calls, each
// within the devices and the reason the person approved. It is part of
// the console's contract: widening it is a widening.
var DisableGrants = surface.GrantRule{Allow: true, MaxTTL: 15 * time.Minute, MaxUses: 10}

// tableComponent is the devices table as an agent sees it: its state to
// read, view actions, and the domain procedures bound to its selection.
func (s *Session) tableComponent() surface.Component {
	return surface.Component{
		Type:        "devices.table",
		InstanceID:  "main",
		Description: "The devices table: the devices matching the site and status filters, sorted, with a multi-row selection that the disable and enable procedures act on.",
		Observations: map[string]surface.Capability{
			"readState": surface.Observation(surface.ObservationDef[TableState]{
				Description: "Read the visible rows, the selection, the sorting and the filters.",
				Read: func(ctx context.Context, _ *surface.Call) (TableState, error) {
					if read := s.app.readState; read != nil {
						return read(ctx, s)
					}
					return s.tableState(ctx)
				},
			}),
		},
		Actions: map[string]surface.Capability{
			"selectRows": surface.Action(surface.ActionDef[SelectRowsInput, surface.None]{
				Description: "Select visible rows by device id: replace the selection, add to it or remove from it.",
				InputSchema: selectRowsSchema,
				Effect:      surface.EffectLocalState,
				Idempotent:  true,
				Precondition: func(ctx context.Context, _ *surface.Call, in SelectRowsInput) error {
					return s.checkVisible(ctx, in.IDs)
				},
				Execute: func(ctx context.Context, _ *surface.Call, in SelectRowsInput) (surface.None, error) {
					s.selectRows(in.IDs, in.Mode)
					return surface.None{}, nil
				},
			}),
			"clearSelection": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description:       "Clear the selection.",
				Effect:            surface.EffectLocalState,
				Idempotent:        true,
				When:              s.hasSelection,
				UnavailableReason: "Nothing is selected.",
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					s.clearSelection()
					return surface.None{}, nil
				},
			}),
			"setFilter": surface.Action(surface.ActionDef[Filters, surface.None]{
				Description: "Show only the devices of one site and/or one status; selected rows that are no longer visible are deselected.",
				InputSchema: setFilterSchema,
				Effect:      surface.EffectLocalState,
				Idempotent:  true,
				Precondition: func(ctx context.Context, _ *surface.Call, in Filters) error {
					return s.checkSite(ctx, in.Site)
				},
				Execute: func(ctx context.Context, _ *surface.Call, in Filters) (surface.None, error) {
					return surface.None{}, s.setFilter(ctx, in)
				},
			}),
			"sortBy": surface.Action(surface.ActionDef[Sorting, surface.None]{
				Description: "Sort the table by a column.",
				InputSchema: sortBySchema,
				Effect:      surface.EffectLocalState,
				Idempotent:  true,
				Execute: func(_ context.Context, _ *surface.Call, in Sorting) (surface.None, error) {
					s.sortBy(in)
					return surface.None{}, nil
				},
			}),
			"openDevice": surface.Action(surface.ActionDef[OpenDeviceInput, surface.None]{
				Description: "Open a device's detail panel (replacing the one open).",
				InputSchema: openDeviceSchema,
				Effect:      surface.EffectNavigation,
				Idempotent:  true,
				Execute: func(ctx context.Context, _ *surface.Call, in OpenDeviceInput) (surface.None, error) {
					return surface.None{}, s.openDevice(ctx, in.ID)
				},
			}),
		},
		// The domain's operations, bound to the live selection: the agent
		// gives a reason, the selected ids are locked in, and the user
		// approves exactly the devices that will be disabled.
		Procedures: []surface.Capability{
			domain.DisableRefWithGrants(s.bindSelection, s.describeSelection, DisableGrants),
			domain.EnableRef(s.bindSelection, s.describeSelection),
			domain.ListRef(),
		},
		Policies: []surface.Policy{
			// The approval card names the devices, not just their ids.
			surface.RequireConfirmation(func(ic *surface.InvokeContext) bool { return ic.CapabilityID == domain.DisableID }, s.disableSummary),
		},
	}
}

// detailComponent is the detail panel of device d. Its instance id is
// the device id: opening another device unmounts this registration and
// mounts a new one.
func (s *Session) detailComponent(d domain.Device) surface.Component {
	id := d.ID
	return surface.Component{
		Type:        "devices.detail",
		InstanceID:  id,
		Description: "The detail panel of one device: its record and its recent status changes.",
		Parent:      &surface.Parent{Type: "devices.table", InstanceID: "main"},
		Observations: map[string]surface.Capability{
			"readDevice": surface.Observation(surface.ObservationDef[DeviceDetail]{
				Description: "Read the device shown in the panel and its recent status changes.",
				Read: func(ctx context.Context, _ *surface.Call) (DeviceDetail, error) {
					return s.deviceDetail(ctx, id)
				},
			}),
		},
		Actions: map[string]surface.Capability{
			"close": surface.Action(surface.ActionDef[surface.None, surface.None]{
				Description: "Close the detail panel and go back to the table.",
				Effect:      surface.EffectNavigation,
				Idempotent:  true,
				Execute: func(context.Context, *surface.Call, surface.None) (surface.None, error) {
					s.closeDetail(id)
					return surface.None{}, nil
				},
			}),
		},
	}
}

// Mount registers the components of the views on screen (it is the
// webhost.Views of the session): the table, and the detail panel if one
// is open, under ctx, which ends when the page has been closed for the
// grace period or the session ends: they unmount then, and a page that
// opens later shows no detail panel. Approvals of an unmounted component
// expire (package webhost expires them: they could not let a call
// through any more).
func (s *Session) Mount(ctx context.Context, _ *webhost.Session) error {
	s.mount.Lock()
	defer s.mount.Unlock()
	s.mu.Lock()
	if s.mountCtx != nil { // mounted before: the page was closed, and its panel with it
		s.view.detail = ""
	}
	open := s.view.detail
	s.mu.Unlock()
	s.mountCtx = ctx
	s.table = s.register(ctx, s.tableComponent())
	s.detail = nil
	if open != "" {
		if d, err := s.app.store.Get(ctx, s.User(), open); err == nil {
			s.detail = s.register(ctx, s.detailComponent(d))
		}
	}
	return nil
}

// mountedLocked reports whether the views are mounted; s.mount is held.
func (s *Session) mountedLocked() bool { return s.mountCtx != nil && s.mountCtx.Err() == nil }

// Notified implements webhost.Listener: another session's procedure
// changed devices, on this replica or another.
func (s *Session) Notified(context.Context, string) { s.devicesChanged() }

// register registers c under ctx; a definition error is a bug of this
// file.
func (s *Session) register(ctx context.Context, c surface.Component) *surface.Handle {
	h, err := s.Registry().RegisterContext(ctx, c)
	if err != nil {
		if errors.Is(err, surface.ErrClosed) {
			return nil
		}
		panic(fmt.Sprintf("console: %s: %v", c.Type, err))
	}
	// Refresh compares When with what it last pushed, and a new
	// registration starts out as "all available": push the real state at
	// once, so later flips are seen.
	h.Refresh()
	return h
}

// shown reports whether the views are mounted.
func (s *Session) shown() bool { return s.ws.Shown() }

// openDevice opens the detail panel of device id, replacing the one open.
func (s *Session) openDevice(ctx context.Context, id string) error {
	d, err := s.app.store.Get(ctx, s.User(), id)
	if errors.Is(err, domain.ErrNotFound) {
		return surface.Precondition("There is no device with this id.", map[string]any{"id": id})
	}
	if err != nil {
		return err
	}
	s.mount.Lock()
	defer s.mount.Unlock()
	if !s.mountedLocked() {
		return surface.Precondition("The page is closed.", nil)
	}
	s.mu.Lock()
	same := s.view.detail == id && s.detail != nil
	s.view.detail = id
	s.mu.Unlock()
	if !same {
		if s.detail != nil {
			s.detail.Unregister() // the panel navigates: the old one unmounts
		}
		s.detail = s.register(s.mountCtx, s.detailComponent(d))
	}
	s.changed(partView)
	return nil
}

// closeDetail closes the detail panel if it shows device id ("" closes
// whatever is open).
func (s *Session) closeDetail(id string) {
	s.mount.Lock()
	defer s.mount.Unlock()
	s.mu.Lock()
	if id != "" && s.view.detail != id {
		s.mu.Unlock()
		return
	}
	s.view.detail = ""
	s.mu.Unlock()
	if s.detail != nil {
		s.detail.Unregister()
		s.detail = nil
	}
	s.changed(partView)
}

// refreshTable re-evaluates the table's When predicates after its state
// changed (the selection: clearSelection, disable and enable flip).
func (s *Session) refreshTable() {
	s.mount.Lock()
	h := s.table
	s.mount.Unlock()
	if h != nil {
		h.Refresh()
	}
	s.changed(partView)
}

// setFilter changes the filters; selected rows that are no longer visible
// are deselected.
func (s *Session) setFilter(ctx context.Context, f Filters) error {
	if f.Site != "" { // as the sites are spelled
		sites, err := s.sites(ctx)
		if err != nil {
			return err
		}
		for _, x := range sites {
			if strings.EqualFold(x, f.Site) {
				f.Site = x
			}
		}
	}
	s.mu.Lock()
	s.view.filters = f
	s.mu.Unlock()
	_, err := s.rows(ctx) // prunes the selection and refreshes
	s.changed(partView)
	return err
}

// sortBy changes the sorting.
func (s *Session) sortBy(in Sorting) {
	if in.Direction == "" {
		in.Direction = "asc"
	}
	s.mu.Lock()
	s.view.sort = in
	s.mu.Unlock()
	s.changed(partView)
}

// selectRows changes the selection: mode replace (default), add or remove.
func (s *Session) selectRows(ids []string, mode string) {
	s.mu.Lock()
	switch mode {
	case "add":
		for _, id := range ids {
			if !slices.Contains(s.view.selection, id) {
				s.view.selection = append(s.view.selection, id)
			}
		}
	case "remove":
		s.view.selection = slices.DeleteFunc(s.view.selection, func(id string) bool { return slices.Contains(ids, id) })
	default:
		s.view.selection = nil
		for _, id := range ids {
			if !slices.Contains(s.view.selection, id) {
				s.view.selection = append(s.view.selection, id)
			}
		}
	}
	s.mu.Unlock()
	s.refreshTable()
}

// toggleRow selects or deselects one row (a click on the page).
func (s *Session) toggleRow(id string) {
	s.mu.Lock()
	selected := slices.Contains(s.view.selection, id)
	s.mu.Unlock()
	if selected {
		s.selectRows([]string{id}, "remove")
	} else {
		s.selectRows([]string{id}, "add")
	}
}

// clearSelection empties the selection.
func (s *Session) clearSelection() {
	s.mu.Lock()
	s.view.selection = nil
	s.mu.Unlock()
	s.refreshTable()
}

// hasSelection is the When of clearSelection.
func (s *Session) hasSelection() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.view.selection) > 0
}

// bindSelection is the binding of the disable and enable references: the
// selected ids, read at every call.
func (s *Session) bindSelection(context.Context) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{"ids": slices.Clone(s.view.selection)}, nil
}

// describeSelection is the live note of the bound references.
func (s *Session) describeSelection() string {
	s.mu.Lock()
	n := len(s.view.selection)
	s.mu.Unlock()
	switch n {
	case 0:
		return "No devices selected."
	case 1:
		return "1 device selected."
	}
	return fmt.Sprintf("%d devices selected.", n)
}

// disableSummary is what the user is asked to approve: the devices by
// name and the reason.
func (s *Session) disableSummary(input any) string {
	m, _ := input.(map[string]any)
	ids, _ := m["ids"].([]any)
	reason, _ := m["reason"].(string)
	names := make([]string, 0, len(ids))
	for _, v := range ids {
		id, _ := v.(string)
		names = append(names, s.nameOf(id))
	}
	noun := "devices"
	if len(names) == 1 {
		noun = "device"
	}
	return fmt.Sprintf("Disable %d %s: %s. Reason: %q", len(names), noun, strings.Join(names, ", "), reason)
}

// nameOf returns a device's name, or its id if it has none.
func (s *Session) nameOf(id string) string {
	d, err := s.app.store.Get(context.Background(), Operator, id)
	if err != nil {
		return id
	}
	return d.Name
}

// devicesChanged runs after a procedure changed devices: rows may have
// left the table, so the selection is pruned and the page re-rendered.
func (s *Session) devicesChanged() {
	if s.shown() {
		_, _ = s.rows(context.Background())
	}
	s.changed(partTable | partDetail)
}

// rows returns the visible rows, sorted, and deselects rows that are no
// longer visible.
func (s *Session) rows(ctx context.Context) ([]Row, error) {
	rows, _, err := s.browse(ctx)
	return rows, err
}

// browse returns the visible rows, sorted, and the sites of all devices,
// in one read of the store, and deselects rows that are no longer
// visible.
func (s *Session) browse(ctx context.Context) ([]Row, []string, error) {
	s.mu.Lock()
	f, so, u := s.view.filters, s.view.sort, s.user
	s.mu.Unlock()
	v, err := s.app.store.Browse(ctx, u, domain.Filter{Site: f.Site, Status: domain.Status(f.Status)})
	if err != nil {
		return nil, nil, err
	}
	devices := v.Devices
	sortDevices(devices, so)
	visible := make(map[string]bool, len(devices))
	for _, d := range devices {
		visible[d.ID] = true
	}
	s.mu.Lock()
	pruned := false
	if s.view.filters == f { // else a newer filter prunes with its own rows
		n := len(s.view.selection)
		s.view.selection = slices.DeleteFunc(s.view.selection, func(id string) bool { return !visible[id] })
		pruned = len(s.view.selection) != n
	}
	selected := make(map[string]bool, len(s.view.selection))
	for _, id := range s.view.selection {
		selected[id] = true
	}
	s.mu.Unlock()
	if pruned {
		s.refreshTable()
	}
	rows := make([]Row, len(devices))
	for i, d := range devices {
		rows[i] = Row{ID: d.ID, Name: d.Name, Site: d.Site, Status: string(d.Status),
			LastSeen: d.UpdatedAt.UTC().Format(time.RFC3339), Selected: selected[d.ID]}
	}
	return rows, v.Sites, nil
}

// tableState is the readState observation.
func (s *Session) tableState(ctx context.Context) (TableState, error) {
	rows, sites, err := s.browse(ctx)
	if err != nil {
		return TableState{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return TableState{Filters: s.view.filters, Sort: s.view.sort, Rows: rows,
		Selection: slices.Clone(s.view.selection), Sites: sites}, nil
}

// sites returns the sites of all devices, sorted.
func (s *Session) sites(ctx context.Context) ([]string, error) {
	v, err := s.app.store.Browse(ctx, s.User(), domain.Filter{Status: domain.StatusOnline})
	return v.Sites, err
}

// checkVisible is the precondition of selectRows.
func (s *Session) checkVisible(ctx context.Context, ids []string) error {
	rows, err := s.rows(ctx)
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range ids {
		if !slices.ContainsFunc(rows, func(r Row) bool { return r.ID == id }) {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return surface.Precondition("Some ids are not visible rows of the table; read the table or change the filters first.",
			map[string]any{"notVisible": missing})
	}
	return nil
}

// checkSite is the precondition of setFilter.
func (s *Session) checkSite(ctx context.Context, site string) error {
	if site == "" {
		return nil
	}
	sites, err := s.sites(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(sites, func(x string) bool { return strings.EqualFold(x, site) }) {
		return surface.Precondition("There is no such site.", map[string]any{"sites": sites})
	}
	return nil
}

// deviceDetail is the readDevice observation.
func (s *Session) deviceDetail(ctx context.Context, id string) (DeviceDetail, error) {
	u := s.User()
	d, err := s.app.store.Get(ctx, u, id)
	if err != nil {
		return DeviceDetail{}, err
	}
	h, err := s.app.store.History(ctx, u, id, 5)
	if err != nil {
		return DeviceDetail{}, err
	}
	return DeviceDetail{Device: d, History: h}, nil
}

// sortDevices sorts by the column, then by name and id.
func sortDevices(ds []domain.Device, so Sorting) {
	key := func(a, b domain.Device) int {
		switch so.Column {
		case "site":
			return cmp.Compare(strings.ToLower(a.Site), strings.ToLower(b.Site))
		case "status":
			return cmp.Compare(a.Status, b.Status)
		case "lastSeen":
			return a.UpdatedAt.Compare(b.UpdatedAt)
		}
		return 0
	}
	slices.SortStableFunc(ds, func(a, b domain.Device) int {
		c := key(a, b)
		if so.Direction == "desc" {
			c = -c
		}
		if c != 0 {
			return c
		}
		if c := cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)); c != 0 {
			if so.Column == "name" && so.Direction == "desc" {
				return -c
			}
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
