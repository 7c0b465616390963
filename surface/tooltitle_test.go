package surface_test

import (
	"testing"

	"github.com/agentsurface/agentsurface/surface"
)

// A tool's title reads as words: its component type, then its
// capability's name; an instance that tells it apart is named; meta tools
// have titles of their own.
func TestToolTitle(t *testing.T) {
	for _, tc := range []struct {
		tool surface.Tool
		want string
	}{
		{surface.Tool{Name: "view_devices__table__selectRows", CapabilityID: "view:devices.table.selectRows"}, "Devices table: select rows"},
		{surface.Tool{Name: "view_devices__table__readState_at_side", CapabilityID: "view:devices.table.readState", InstanceID: "side"}, "Devices table (side): read state"},
		{surface.Tool{Name: "domain_devices__disable", CapabilityID: "domain:devices.disable"}, "Devices: disable"},
		{surface.Tool{Name: "domain_fleet__bulkDisable", CapabilityID: "domain:fleet-ops.bulkDisable"}, "Fleet ops: bulk disable"},
		{surface.Tool{Name: "view_net__readHTTPState", CapabilityID: "view:net.readHTTPState"}, "Net: read HTTP state"},
		{surface.Tool{Name: "view_app__v2Settings", CapabilityID: "view:app.v2Settings"}, "App: v2 settings"},
		{surface.Tool{Name: "domain_ping", CapabilityID: "domain:ping"}, "Ping"},
		{surface.Tool{Name: surface.MetaDiscover}, "Discover capabilities"},
		{surface.Tool{Name: surface.MetaRead}, "Read an observation"},
		{surface.Tool{Name: surface.MetaAct}, "Call an action or procedure"},
		{surface.Tool{Name: "other"}, "other"},
		{surface.Tool{Name: "odd", CapabilityID: "x:y"}, "odd"},
	} {
		if got := tc.tool.Title(); got != tc.want {
			t.Errorf("%s: Title() = %q, want %q", tc.tool.CapabilityID+tc.tool.Name, got, tc.want)
		}
	}
}
