package replica_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentsurface/agentsurface/replica"
	"github.com/agentsurface/agentsurface/surface"
	"github.com/jackc/pgx/v5/pgconn"
	"pgregory.net/rapid"
)

// fakeAuditDB stands in for Postgres behind an AuditSink, on the clock of
// the synctest bubble it runs in: each write is one statement and one
// commit, which stores all its rows or none.
type fakeAuditDB struct {
	mu                sync.Mutex
	script            []fakeWrite     // how the next writes go, in order; then: at once, committed
	bad               map[string]bool // rows Postgres refuses as invalid data
	stored            []string        // committed rows (invocation ids), in commit order
	writes            int             // write calls
	active, maxActive int             // writes under way at once
}

// fakeWrite is how one write goes: after delay, or once release gives
// its outcome, it fails (a broken connection) or commits; the context
// ending first ends it uncommitted.
type fakeWrite struct {
	delay   time.Duration
	release chan error // nil: after delay; else its value is the outcome (nil: commit)
	fail    bool
}

func (db *fakeAuditDB) write(ctx context.Context, ids []string) error {
	db.mu.Lock()
	db.writes++
	db.active++
	db.maxActive = max(db.maxActive, db.active)
	var w fakeWrite
	if len(db.script) > 0 {
		w, db.script = db.script[0], db.script[1:]
	}
	db.mu.Unlock()
	defer func() {
		db.mu.Lock()
		db.active--
		db.mu.Unlock()
	}()
	var outcome error
	if w.release != nil {
		select {
		case outcome = <-w.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		t := time.NewTimer(w.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		if w.fail {
			outcome = errors.New("fake: connection reset by peer")
		}
	}
	if outcome != nil {
		return outcome
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, id := range ids {
		if db.bad[id] {
			return &pgconn.PgError{Code: "22P02", Message: "fake: invalid input syntax"}
		}
	}
	db.stored = append(db.stored, ids...)
	return nil
}

func (db *fakeAuditDB) state() (stored []string, writes, active, maxActive int) {
	db.mu.Lock()
	defer db.mu.Unlock()
	return slices.Clone(db.stored), db.writes, db.active, db.maxActive
}

// recordAsync calls Record with invocation id on a goroutine of its own
// and returns where its error arrives.
func recordAsync(sink surface.AuditSink, id string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		ch <- sink.Record(context.Background(), surface.AuditEvent{Type: surface.AuditInvocationSettled, InvocationID: id})
	}()
	return ch
}

// waiting reports whether ch has no value yet.
func waiting(ch <-chan error) bool {
	select {
	case err := <-ch:
		panic(fmt.Sprintf("already answered: %v", err))
	default:
		return true
	}
}

// A write that fails keeps its records, which the writer writes again
// after a short backoff, with those queued meanwhile: every durable
// Record waits for the commit of its own record, and Stats.Queued counts
// the records being written. (Issue 38.4.)
func TestDurableAuditRetriesAFailedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := make(chan error)
		db := &fakeAuditDB{script: []fakeWrite{{release: first}}}
		sink := replica.NewAuditSinkOn(db.write, &replica.AuditOptions{Durable: true, Timeout: time.Minute})
		defer sink.Close()
		a := recordAsync(sink, "a")
		synctest.Wait()
		b := recordAsync(sink, "b")
		synctest.Wait()
		if st := sink.Stats(); st.Queued != 2 || st.Written != 0 {
			t.Fatalf("stats with a write under way and a record behind it: %+v, want 2 queued", st)
		}
		first <- errors.New("fake: connection reset by peer")
		synctest.Wait()
		waiting(a) // its write failed: it waits for the retry, not answered wrongly
		waiting(b)
		start := time.Now()
		for _, ch := range []<-chan error{a, b} {
			if err := <-ch; err != nil {
				t.Fatalf("a record written again after a failed write: %v", err)
			}
		}
		if waited := time.Since(start); waited > time.Second {
			t.Fatalf("the retry came after %v", waited)
		}
		stored, writes, _, maxActive := db.state()
		if !slices.Equal(stored, []string{"a", "b"}) || writes != 2 || maxActive != 1 {
			t.Fatalf("stored %v in %d writes (at most %d at once), want [a b] in 2 (1)", stored, writes, maxActive)
		}
		if st := sink.Stats(); st.Written != 2 || st.Dropped != 0 || st.Queued != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// Close waits for the write under way and writes what is queued behind
// it; a Record after Close is refused at once. (Issue 38.4.)
func TestDurableAuditCloseDrainsTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := make(chan error)
		db := &fakeAuditDB{script: []fakeWrite{{release: first}}}
		sink := replica.NewAuditSinkOn(db.write, &replica.AuditOptions{Durable: true, BatchSize: 1, Timeout: time.Minute,
			CloseTimeout: time.Minute})
		var answers []<-chan error
		for _, id := range []string{"r1", "r2", "r3"} {
			answers = append(answers, recordAsync(sink, id))
			synctest.Wait()
		}
		if st := sink.Stats(); st.Queued != 3 {
			t.Fatalf("stats %+v, want 3 queued (1 being written, 2 behind)", st)
		}
		closed := make(chan struct{})
		go func() {
			_ = sink.Close()
			close(closed)
		}()
		synctest.Wait()
		if err := sink.Record(context.Background(), surface.AuditEvent{InvocationID: "late"}); !errors.Is(err, surface.ErrAuditDropped) {
			t.Fatalf("Record during Close: %v", err)
		}
		select {
		case <-closed:
			t.Fatal("Close returned with a write under way")
		default:
		}
		first <- nil
		<-closed
		for i, ch := range answers {
			if err := <-ch; err != nil {
				t.Fatalf("record %d: %v", i+1, err)
			}
		}
		if stored, writes, _, _ := db.state(); !slices.Equal(stored, []string{"r1", "r2", "r3"}) || writes != 3 {
			t.Fatalf("stored %v in %d writes, want r1 r2 r3 in 3 (BatchSize 1)", stored, writes)
		}
		if st := sink.Stats(); st.Written != 3 || st.Dropped != 1 || st.Queued != 0 {
			t.Fatalf("stats %+v, want 3 written, 1 dropped (the late one)", st)
		}
	})
}

// When Postgres never takes them, Close gives up at CloseTimeout exactly:
// every durable Record still waiting is answered then, each record counted
// as dropped once, and the log says so.
// (Issue 38.4.)
func TestDurableAuditCloseGivesUpAtCloseTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := &fakeAuditDB{}
		for range 1000 {
			db.script = append(db.script, fakeWrite{delay: 10 * time.Millisecond, fail: true})
		}
		logs := new(syncWriter)
		sink := replica.NewAuditSinkOn(db.write, &replica.AuditOptions{Durable: true, BatchSize: 1, Timeout: time.Hour,
			CloseTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		var answers []<-chan error
		for i := range 5 {
			answers = append(answers, recordAsync(sink, fmt.Sprint("r", i)))
		}
		time.Sleep(3 * time.Second) // synctest's clock: the failing writes go on meanwhile
		if st := sink.Stats(); st.Queued != 5 {
			t.Fatalf("stats while the writes fail: %+v, want 5 queued", st)
		}
		start := time.Now()
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 5*time.Second {
			t.Fatalf("Close took %v, want the CloseTimeout, 5s", took)
		}
		for i, ch := range answers {
			if err := <-ch; !errors.Is(err, surface.ErrAuditDropped) {
				t.Fatalf("record %d: %v, want ErrAuditDropped", i, err)
			}
		}
		if st := sink.Stats(); st.Dropped != 5 || st.Written != 0 || st.Queued != 0 {
			t.Fatalf("stats %+v", st)
		}
		if !strings.Contains(logs.String(), "closing: Postgres did not take them") {
			t.Fatalf("log:\n%s", logs)
		}
	})
}

// Property: whatever the timing of records and the fate of each write
// (slow, failing, refusing a row, outlasting the deadline), and whether
// Record waits for the commit or not:
//   - a durable Record is answered within Timeout, nil exactly when its
//     record is committed, which then happens once; any other answer
//     wraps ErrAuditDropped and the record is never stored;
//   - an asynchronous Record's record, once accepted, is committed once
//     or counted as dropped;
//   - one write at a time is under way;
//   - Close returns within CloseTimeout (or a write's Timeout, if one was
//     under way), nothing queued, Written the rows stored and Written +
//     Dropped the records offered.
//
// (Issue 38.4.)
func TestAuditSinkVerdictsProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		durable := rapid.Bool().Draw(rt, "durable")
		opts := replica.AuditOptions{Durable: durable,
			BatchSize:    rapid.IntRange(1, 4).Draw(rt, "batch"),
			QueueSize:    rapid.IntRange(1, 12).Draw(rt, "queue"),
			Timeout:      time.Duration(rapid.IntRange(1, 4).Draw(rt, "timeout")) * time.Second,
			CloseTimeout: time.Duration(rapid.IntRange(1, 4).Draw(rt, "closeTimeout")) * time.Second}
		n := rapid.IntRange(1, 25).Draw(rt, "records")
		gaps := rapid.SliceOfN(rapid.IntRange(0, 1500), n, n).Draw(rt, "gaps")
		bad := rapid.SliceOfN(rapid.IntRange(0, 9), n, n).Draw(rt, "bad")
		script := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) fakeWrite {
			return fakeWrite{delay: time.Duration(rapid.IntRange(0, 5000).Draw(t, "delay")) * time.Millisecond,
				fail: rapid.IntRange(0, 2).Draw(t, "fail") == 0}
		}), 0, 30).Draw(rt, "writes")
		closeAfter := time.Duration(rapid.IntRange(0, 6000).Draw(rt, "closeAfter")) * time.Millisecond
		var failure string
		synctest.Test(t, func(t *testing.T) {
			db := &fakeAuditDB{script: script, bad: map[string]bool{}}
			for i, b := range bad {
				if b == 0 {
					db.bad[fmt.Sprint("r", i)] = true
				}
			}
			sink := replica.NewAuditSinkOn(db.write, &opts)
			type answer struct {
				err  error
				took time.Duration
			}
			answers := make([]chan answer, n)
			for i := range n {
				time.Sleep(time.Duration(gaps[i]) * time.Millisecond) // synctest's clock: no real wait
				answers[i] = make(chan answer, 1)
				go func() {
					start := time.Now()
					err := sink.Record(context.Background(), surface.AuditEvent{InvocationID: fmt.Sprint("r", i)})
					answers[i] <- answer{err, time.Since(start)}
				}()
			}
			time.Sleep(closeAfter) // synctest's clock, as the gaps above
			start := time.Now()
			_ = sink.Close()
			took := time.Since(start)
			fail := func(format string, args ...any) {
				if failure == "" {
					failure = fmt.Sprintf(format, args...)
				}
			}
			got := make([]answer, n)
			for i, ch := range answers {
				select {
				case got[i] = <-ch:
				case <-time.After(time.Hour): // virtual time: a Record never answered
					fail("r%d never answered", i)
					return
				}
			}
			// Every Record has returned (some after Close, refused).
			stored, _, _, maxActive := db.state()
			st := sink.Stats()
			count := map[string]int{}
			for _, id := range stored {
				count[id]++
			}
			accepted := 0
			for i, a := range got {
				id := fmt.Sprint("r", i)
				if count[id] > 1 {
					fail("%s stored %d times", id, count[id])
				}
				if a.err != nil && !errors.Is(a.err, surface.ErrAuditDropped) {
					fail("%s: %v, want nil or ErrAuditDropped", id, a.err)
				}
				if a.err == nil {
					accepted++
				}
				if durable {
					if a.took > opts.Timeout {
						fail("%s answered after %v, Timeout %v", id, a.took, opts.Timeout)
					}
					if (a.err == nil) != (count[id] == 1) {
						fail("%s: answered %v, stored %d times", id, a.err, count[id])
					}
				} else if a.err != nil && count[id] != 0 {
					fail("%s refused (%v) yet stored", id, a.err)
				}
			}
			if maxActive > 1 {
				fail("%d writes at once, want one at a time", maxActive)
			}
			if limit := max(opts.CloseTimeout, opts.Timeout); took > limit {
				fail("Close took %v (CloseTimeout %v, Timeout %v)", took, opts.CloseTimeout, opts.Timeout)
			}
			if st.Queued != 0 || st.Written != uint64(len(stored)) || st.Written+st.Dropped != uint64(n) {
				fail("stats %+v after Close: %d stored of %d records (%d accepted)", st, len(stored), n, accepted)
			}
		})
		if failure != "" {
			rt.Fatal(failure)
		}
	})
}

// A durable sink keeps a second statement in flight while Postgres
// writes the first, so that Postgres never waits for the writer to
// answer and gather; the asynchronous sink keeps one. (Issue 38.4.)
func TestDurableAuditKeepsTwoStatementsInFlight(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprint("durable=", durable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan error)
				db := &fakeAuditDB{script: []fakeWrite{{release: release}}}
				sink := replica.NewAuditSinkOn(db.write, &replica.AuditOptions{Durable: durable, BatchSize: 1, Timeout: time.Minute})
				first := recordAsync(sink, "r0")
				synctest.Wait() // r0's statement is sent, and Postgres holds it
				rest := []<-chan error{recordAsync(sink, "r1"), recordAsync(sink, "r2"), recordAsync(sink, "r3")}
				synctest.Wait()
				release <- nil
				for i, ch := range append([]<-chan error{first}, rest...) {
					if err := <-ch; err != nil {
						t.Fatalf("r%d: %v", i, err)
					}
				}
				if err := sink.Close(); err != nil {
					t.Fatal(err)
				}
				want := 1
				if durable {
					want = 2
				}
				if got := sink.MostInFlight(); got != want {
					t.Fatalf("%d statements in flight at most, want %d", got, want)
				}
				stored, _, _, _ := db.state()
				slices.Sort(stored)
				if !slices.Equal(stored, []string{"r0", "r1", "r2", "r3"}) {
					t.Fatalf("stored %v, want r0…r3 once each", stored)
				}
			})
		})
	}
}
