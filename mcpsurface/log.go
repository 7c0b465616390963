package mcpsurface

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// sdkLog is the slog.Handler the SDK logs a Server's diagnostics to. It
// passes everything on to the Server's logger except the SDK's warning
// that a change notification found no stream to travel on: the SDK sends
// notifications/…/list_changed to every stateful session, also to those
// that never opened their standalone stream (GET), which is not a fault
// (such clients list again when they need to). That warning is logged
// once per Server, at debug level.
type sdkLog struct {
	slog.Handler
	once *sync.Once
}

func newSDKLog(l *slog.Logger) *slog.Logger {
	return slog.New(sdkLog{Handler: l.Handler(), once: new(sync.Once)})
}

// Handle implements slog.Handler.
func (h sdkLog) Handle(ctx context.Context, r slog.Record) error {
	if !undelivered(r.Message) {
		return h.Handler.Handle(ctx, r)
	}
	var err error
	h.once.Do(func() {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return
		}
		d := slog.NewRecord(r.Time, slog.LevelDebug, r.Message+" (a session without an open stream misses change notifications; logged once)", r.PC)
		r.Attrs(func(a slog.Attr) bool { d.AddAttrs(a); return true })
		err = h.Handler.Handle(ctx, d)
	})
	return err
}

// WithAttrs implements slog.Handler.
func (h sdkLog) WithAttrs(as []slog.Attr) slog.Handler {
	return sdkLog{Handler: h.Handler.WithAttrs(as), once: h.once}
}

// WithGroup implements slog.Handler.
func (h sdkLog) WithGroup(name string) slog.Handler {
	return sdkLog{Handler: h.Handler.WithGroup(name), once: h.once}
}

// undelivered reports whether msg is the SDK's warning about a
// notification sent to a session without an open stream.
func undelivered(msg string) bool {
	return strings.HasPrefix(msg, "calling notifications/") && strings.Contains(msg, "stream not connected")
}

// sdkInfoAsDebug is the slog.Handler the SDK's HTTP transport logs to: its
// info records (a few per request: a session opened, a request served) go
// at debug level, so that an application logging at info gets one line
// per event of its own, not three per MCP request. Warnings and errors
// pass unchanged.
type sdkInfoAsDebug struct{ slog.Handler }

// infoAsDebug returns l with the SDK's info records demoted to debug.
func infoAsDebug(l *slog.Logger) *slog.Logger {
	return slog.New(sdkInfoAsDebug{l.Handler()})
}

// Enabled implements slog.Handler.
func (h sdkInfoAsDebug) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, demote(l))
}

// Handle implements slog.Handler.
func (h sdkInfoAsDebug) Handle(ctx context.Context, r slog.Record) error {
	if d := demote(r.Level); d != r.Level {
		if !h.Handler.Enabled(ctx, d) {
			return nil
		}
		r.Level = d
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h sdkInfoAsDebug) WithAttrs(as []slog.Attr) slog.Handler {
	return sdkInfoAsDebug{h.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h sdkInfoAsDebug) WithGroup(name string) slog.Handler {
	return sdkInfoAsDebug{h.Handler.WithGroup(name)}
}

// demote maps the SDK's levels below warning to debug.
func demote(l slog.Level) slog.Level {
	if l < slog.LevelWarn && l > slog.LevelDebug {
		return slog.LevelDebug
	}
	return l
}
