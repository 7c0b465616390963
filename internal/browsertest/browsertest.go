// Package browsertest gives tests a real headless Chromium (Debian's
// chromium package), or skips them, saying how to install one.
package browsertest

import (
	"context"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium returns the Chromium binary, or "" when none is installed.
func Chromium() string {
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Headless starts a headless Chromium for t, with a profile of its own
// and a 1400×1000 window, or skips t when none is installed. Tabs made
// with chromedp.NewContext from the returned context share the browser;
// it stops when t ends, before the cleanups registered earlier: start
// the servers the pages talk to first, so that the pages close before
// they do.
func Headless(t testing.TB) context.Context {
	t.Helper()
	bin := Chromium()
	if bin == "" {
		t.Skip("no Chromium binary: install Debian's chromium package (apt-get install -y chromium) to run the browser test")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	return ctx
}
