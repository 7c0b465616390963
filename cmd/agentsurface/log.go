package main

import (
	"fmt"
	"log/slog"
)

// parseLogLevel parses --log-level: debug, info, warn or error.
func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}
