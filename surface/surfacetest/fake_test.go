package surfacetest_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeTB is a testing.TB that records failures instead of failing the
// test, so that a test can assert that a helper fails when it should.
// Fatal, Fatalf and FailNow end the calling goroutine, as they do for a
// real test: run the helper with fatal or failures. Every other method is
// the real test's (Cleanup, Context, TempDir, Log, …).
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string // Error and Errorf messages
	fatals []string // Fatal and Fatalf messages
}

func newFakeTB(t *testing.T) *fakeTB { return &fakeTB{TB: t} }

func (f *fakeTB) Helper() {}

func (f *fakeTB) Error(args ...any) { f.record(&f.errors, fmt.Sprint(args...)) }

func (f *fakeTB) Errorf(format string, args ...any) {
	f.record(&f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatal(args ...any) {
	f.record(&f.fatals, fmt.Sprint(args...))
	runtime.Goexit()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.record(&f.fatals, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (f *fakeTB) Fail() { f.record(&f.errors, "Fail") }

func (f *fakeTB) FailNow() {
	f.record(&f.fatals, "FailNow")
	runtime.Goexit()
}

func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.errors)+len(f.fatals) > 0
}

func (f *fakeTB) record(to *[]string, msg string) {
	f.mu.Lock()
	*to = append(*to, msg)
	f.mu.Unlock()
}

// run runs fn on a goroutine of its own, so that a Fatal ends fn only, and
// reports whether fn returned normally.
func (f *fakeTB) run(fn func()) (returned bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
		returned = true
	}()
	<-done
	return returned
}

// fatal runs fn with a fake test and fails t unless fn failed fatally
// exactly once with a message containing each of want; it returns the
// message.
func fatal(t *testing.T, fn func(tb *fakeTB), want ...string) string {
	t.Helper()
	f := newFakeTB(t)
	if f.run(func() { fn(f) }) {
		t.Fatalf("the helper returned; want it to fail the test (errors %q)", f.errors)
	}
	if len(f.fatals) != 1 || len(f.errors) != 0 {
		t.Fatalf("fatals %q, errors %q; want one fatal", f.fatals, f.errors)
	}
	for _, w := range want {
		if !strings.Contains(f.fatals[0], w) {
			t.Fatalf("failure %q does not say %q", f.fatals[0], w)
		}
	}
	return f.fatals[0]
}

// passes runs fn with a fake test and fails t if fn failed it.
func passes(t *testing.T, fn func(tb *fakeTB)) {
	t.Helper()
	f := newFakeTB(t)
	if !f.run(func() { fn(f) }) || f.Failed() {
		t.Fatalf("the helper failed the test: fatals %q, errors %q", f.fatals, f.errors)
	}
}
