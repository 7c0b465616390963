// Package version reports the version of the agentsurface module in the
// running binary, from its build information.
package version

import (
	"runtime/debug"
	"strings"
)

// modulePath is the path of this module.
const modulePath = "github.com/agentsurface/agentsurface"

// Module returns the version of the agentsurface module built into the
// running binary: its tagged version ("v1.2.3") when the binary was built
// from a module download (go install …@v1.2.3) or depends on a tagged
// release, else "(devel)", followed by "+" and the first 12 digits of the
// commit when the build recorded one (a build from a checkout).
func Module() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	return fromBuildInfo(bi)
}

// fromBuildInfo is Module on given build information.
func fromBuildInfo(bi *debug.BuildInfo) string {
	v := ""
	if bi.Main.Path == modulePath {
		v = bi.Main.Version
	} else {
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				if d.Replace != nil {
					d = d.Replace
				}
				v = d.Version
				break
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if !strings.HasPrefix(v, "(devel)") {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return v + "+" + s.Value[:12]
		}
	}
	return v
}
