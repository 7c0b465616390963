package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go install of a release", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.4.0"}, Settings: rev}, "v1.4.0"},
		{"a checkout", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: rev}, "(devel)+0123456789ab"},
		{"a checkout without VCS stamping", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "(devel)"},
		{"a dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "v0.3.0"},
			Deps: []*debug.Module{{Path: "example.com/other", Version: "v9.9.9"}, {Path: modulePath, Version: "v1.2.3"}}, Settings: rev}, "v1.2.3"},
		{"a replaced dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.2.3", Replace: &debug.Module{Path: "../agentsurface", Version: ""}}}, Settings: rev}, "(devel)+0123456789ab"},
		{"a pseudo-version", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.0.0-20261203110000-0123456789ab"}}, "v0.0.0-20261203110000-0123456789ab"},
	} {
		if got := fromBuildInfo(&tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if Module() == "" {
		t.Error("Module is empty")
	}
}
