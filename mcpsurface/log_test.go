package mcpsurface_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/mcpsurface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// A change notification to a stateful session that never opened its
// stream is not a fault: the SDK's warning about it is logged once per
// server, at debug level, however many sessions and changes there are.
// (Issue: the devices demo logged it 2–6 times per surface change.)
func TestUndeliveredNotificationLoggedOnceAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		t.Run(level.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				users := twoUsers(t)
				var logs syncBuffer
				log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: level}))
				f := &httpFixture{sessions: users}
				f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{Options: mcpsurface.Options{Logger: log}})
				p := servePipe(f.h)
				defer p.stop()
				defer f.h.Close()
				alice := rawClient{p.client, "http://pipe/mcp", "tok-alice"}
				for range 3 {
					alice.open(t) // no stream
				}
				s := users["tok-alice"]
				for i := range 4 {
					h := surfacetest.MustRegister(t, s.reg, s.app.table(fmt.Sprint("extra", i)))
					time.Sleep(time.Second) // past the SDK's debounce: one notification per change
					synctest.Wait()
					h.Unregister()
					time.Sleep(time.Second)
					synctest.Wait()
				}
				var warned, debug int
				for line := range strings.Lines(logs.String()) {
					if !strings.Contains(line, "stream not connected") {
						continue
					}
					var rec struct{ Level string }
					_ = json.Unmarshal([]byte(line), &rec)
					switch rec.Level {
					case "DEBUG":
						debug++
					default:
						warned++
					}
				}
				want := 0
				if level == slog.LevelDebug {
					want = 1
				}
				if warned != 0 || debug != want {
					t.Fatalf("%d warnings and %d debug records about undelivered notifications, want 0 and %d:\n%s", warned, debug, want, logs.String())
				}
			})
		})
	}
}

// The SDK's per-request diagnostics are debug, not info: an application
// logging at info gets no line per MCP request (a load test of ten
// seconds wrote eleven thousand), while its warnings still show.
func TestSDKRequestLogsAtDebug(t *testing.T) {
	users := twoUsers(t)
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var logs syncBuffer
		log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: level}))
		f := &httpFixture{sessions: users}
		f.h = mcpsurface.NewHTTPHandler(f.resolver(), &mcpsurface.HTTPOptions{Options: mcpsurface.Options{Logger: log}})
		p := servePipe(f.h)
		alice := rawClient{p.client, "http://pipe/mcp", "tok-alice"}
		for range 5 {
			sid := alice.open(t)
			alice.listTools(t, sid)
			if status, _, err := alice.call(bg, sid, 7, "view_devices__table__readState", `{}`); err != nil || status != 200 {
				t.Fatalf("call: %d %v", status, err)
			}
		}
		p.stop()
		_ = f.h.Close()
		lines := strings.Count(logs.String(), "\n")
		switch {
		case level == slog.LevelInfo && lines != 0:
			t.Errorf("at info, 15 requests logged %d lines:\n%s", lines, logs.String())
		case level == slog.LevelDebug && !strings.Contains(logs.String(), `"level":"DEBUG"`):
			t.Errorf("at debug, the SDK's diagnostics are gone:\n%s", logs.String())
		}
	}
}
