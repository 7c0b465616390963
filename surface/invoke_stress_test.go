package surface_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/agentsurface/agentsurface/surface"
	"github.com/agentsurface/agentsurface/surface/surfacetest"
)

// TestInvokeStress hammers one Replace-mode registry with concurrent
// invocations (actions and observations, 4 consumers, fresh, minted and
// reused invocation ids, per-call timeouts and cancellations) while another
// goroutine mounts, replaces, disables and unmounts the instances the calls
// target. Handlers record every execution in a ledger keyed by dedupe key
// (consumer key + " " + invocation id) and return that key and a unique
// execution serial as their output.
//
// For every call it asserts:
//   - Invoke returns: every call runs under a 30s workload context and the
//     test fails if any call was still waiting when it ended (calls hung
//     until cancelled); if the workers have not all returned 10s after that,
//     it dumps all goroutines and fails (deadlock). Leaks are goleak's job;
//   - the Result is well formed: status ok (no Error) or error (an Error
//     whose Code is in the closed set and possible in this setup, whose
//     Retry is in the closed set and whose Message is non-empty and at most
//     300 UTF-16 units); CapabilityID echoes the request; InvocationID
//     echoes it or is a minted "inv_" id; SurfaceVersion is a decimal; the
//     Result marshals to valid JSON;
//   - an ok Result's output names the caller's own dedupe key and the
//     serial of an execution of that key, of the called capability, whose
//     handler returned success: an ok result always corresponds to a real
//     execution of that very key.
//
// With a dedupe cache that holds every key for the whole run ("window"), so
// that a result stays inside its dedupe window until the test ends, it
// also asserts, per key:
//   - executions ≤ 1 + the number of earlier executions of the key whose
//     handler returned a non-cacheable error (RATE_LIMITED or
//     CONFIRMATION_REQUIRED; INVOCATION_CONFLICT never reaches a handler):
//     nothing else ever lets a key execute again;
//   - at most one distinct cacheable envelope is ever returned for it,
//     byte for byte (joins and replays are that envelope verbatim), and only
//     to callers that sent the same request; excluded are
//     INVOCATION_CONFLICT, RATE_LIMITED, CONFIRMATION_REQUIRED (never
//     cached) and CANCELLED when the caller's own context had ended (a
//     joiner that gives up gets its own CANCELLED);
//   - at most one distinct ok serial.
//
// Through a listener it asserts that the invocation events pair up. The
// settled event carries no consumer, so they are counted per invocation id
// (over all consumers): settled never outnumbers started at any point of
// delivery and the counts are equal at the end; at least one pair and at
// most one per call (joins and replays emit nothing); each settled event's
// code is one that a call with that invocation id actually got back
// (settledCount[code] ≤ resultCount[code]); status ok iff no code.
// surface-changed versions only grow.
//
// With a tiny, short-lived cache ("evict") keys are evicted and may run
// again, so the per-key checks above are replaced by: an INVOCATION_CONFLICT
// for a key implies another call used the same key with a different
// request (the same request, canonically, never conflicts with itself).
// That check also runs in "window" mode.
func TestInvokeStress(t *testing.T) {
	ops := 1500 // per worker; half that in evict mode
	if testing.Short() {
		ops = 250
	}
	t.Run("window", func(t *testing.T) {
		runInvokeStress(t, stressConfig{ops: ops, strict: true, limits: surface.Limits{
			DedupeCacheSize: 1 << 20, // never evict during the run
		}})
	})
	t.Run("window-isolated", func(t *testing.T) {
		runInvokeStress(t, stressConfig{ops: ops / 2, strict: true, isolate: true, limits: surface.Limits{
			DedupeCacheSize: 1 << 20,
		}})
	})
	t.Run("evict", func(t *testing.T) {
		runInvokeStress(t, stressConfig{ops: ops / 2, limits: surface.Limits{
			DedupeCacheSize: 16,
			DedupeCacheTTL:  5 * time.Millisecond,
		}})
	})
}

const (
	stressType    = "stress.widget"
	stressRead    = "view:stress.widget.read"
	stressAct     = "view:stress.widget.act"
	stressWorkers = 8
)

var (
	stressInstances = []string{"a", "b", "c"}
	stressConsumers = []surface.Consumer{
		{ID: "c0", Kind: surface.ConsumerTest},
		{ID: "c1", Kind: surface.ConsumerTest},
		{ID: "c2", Kind: surface.ConsumerMCPBridge},
		{}, // anonymous embedded
	}
	// stressInputs are the inputs calls send. Entries sharing a label have
	// the same canonical form (and so the same fingerprint): whitespace
	// does not count, and an absent input fingerprints as null.
	stressInputs = []stressInput{
		{"a", `{"ids":["a"]}`},
		{"a", " { \"ids\" : [ \"a\" ] }\n"},
		{"ab", `{"ids":["a","b"]}`},
		{"none", ``},
		{"none", `null`},
		{"bad-type", `{"ids":1}`},
		{"not-json", `{"ids":`},
	}
	// stressPossible are the codes this workload can produce. No policies,
	// preconditions or confirmations are configured, so NOT_AUTHENTICATED,
	// NOT_AUTHORIZED, PRECONDITION_FAILED and CONFIRMATION_INVALID cannot
	// occur; CONFIRMATION_REQUIRED and RATE_LIMITED also come from handlers.
	stressPossible = map[surface.Code]bool{
		surface.CodeCapabilityNotFound: true, surface.CodeCapabilityNotAvailable: true,
		surface.CodeAmbiguousInstance: true, surface.CodeComponentUnmounted: true,
		surface.CodeStaleCapability: true, surface.CodeInvocationConflict: true,
		surface.CodeInvalidInput: true, surface.CodeConfirmationRequired: true,
		surface.CodeRateLimited: true, surface.CodeTimeout: true,
		surface.CodeCancelled: true, surface.CodeExecutionFailed: true,
	}
	allCodes = map[surface.Code]bool{
		surface.CodeCapabilityNotFound: true, surface.CodeCapabilityNotAvailable: true,
		surface.CodeAmbiguousInstance: true, surface.CodeComponentUnmounted: true,
		surface.CodeStaleCapability: true, surface.CodeInvocationConflict: true,
		surface.CodeInvalidInput: true, surface.CodeNotAuthenticated: true,
		surface.CodeNotAuthorized: true, surface.CodePreconditionFailed: true,
		surface.CodeConfirmationRequired: true, surface.CodeConfirmationInvalid: true,
		surface.CodeRateLimited: true, surface.CodeTimeout: true,
		surface.CodeCancelled: true, surface.CodeExecutionFailed: true,
	}
	allRetries = map[surface.Retry]bool{
		surface.RetryNo: true, surface.RetryYes: true, surface.RetryAfterRefresh: true,
		surface.RetryAfterDelay: true, surface.RetryWithConfirmation: true,
		surface.RetryWithChanges: true,
	}
)

// neverCached reports whether a result with code c is never stored in the
// dedupe cache (semantics §6).
func neverCached(c surface.Code) bool {
	return c == surface.CodeInvocationConflict || c == surface.CodeRateLimited || c == surface.CodeConfirmationRequired
}

type stressInput struct{ label, raw string }

type stressConfig struct {
	ops     int
	strict  bool
	isolate bool // Options.IsolateHandlers
	limits  surface.Limits
}

type stressIn struct {
	IDs []string `json:"ids"`
}

type stressOut struct {
	Key    string `json:"key"`
	Serial int64  `json:"serial"`
}

// stressExec is one handler execution.
type stressExec struct {
	key   string
	capID string
	ok    bool // the handler returned success
}

// stressKey is the execution count of one dedupe key.
type stressKey struct {
	execs    int
	released int // executions whose handler returned a non-cacheable error
}

// stressLedger records handler executions. Handlers write it before they
// return, so whatever a caller learns from a result is already recorded.
type stressLedger struct {
	strict bool
	serial atomic.Int64

	mu         sync.Mutex
	rng        *rand.Rand // the handlers' choices
	keys       map[string]*stressKey
	execs      map[int64]*stressExec
	violations []string
}

func newStressLedger(strict bool, seed uint64) *stressLedger {
	return &stressLedger{strict: strict, rng: rand.New(rand.NewPCG(seed, 1<<32)), keys: map[string]*stressKey{}, execs: map[int64]*stressExec{}}
}

// handle is the body of both the observation and the action.
func (l *stressLedger) handle(ctx context.Context, call *surface.Call) (stressOut, error) {
	key := call.Consumer.Key() + " " + call.InvocationID
	serial := l.serial.Add(1)
	x := &stressExec{key: key, capID: call.CapabilityID}
	l.mu.Lock()
	k := l.keys[key]
	if k == nil {
		k = &stressKey{}
		l.keys[key] = k
	}
	k.execs++
	if l.strict && k.execs > 1+k.released {
		l.violations = append(l.violations, fmt.Sprintf("key %q executed %d times with only %d non-cacheable earlier outcomes", key, k.execs, k.released))
	}
	l.execs[serial] = x
	r, sleep := l.rng.IntN(40), time.Duration(l.rng.IntN(1000))*time.Microsecond
	l.mu.Unlock()

	var err error
	switch {
	case r == 0:
		err = surface.NewError(surface.CodeRateLimited, "", map[string]any{"reason": "rate", "retryAfterMs": 1})
	case r == 1:
		err = surface.NewError(surface.CodeConfirmationRequired, "", map[string]any{"origin": "server"})
	case r == 2:
		err = errors.New("stress: SELECT * FROM secrets failed") // must not leak
	case r == 3:
		panic("stress: handler panic")
	case r < 14: // sleep up to 1ms, honouring ctx
		tm := time.NewTimer(sleep)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			err = ctx.Err()
		}
	case r == 14: // ignore ctx for a moment: late settlements
		time.Sleep(300 * time.Microsecond)
	}
	l.mu.Lock()
	switch {
	case err == nil:
		x.ok = true
	case errors.Is(err, surface.CodeRateLimited), errors.Is(err, surface.CodeConfirmationRequired):
		k.released++
	}
	l.mu.Unlock()
	return stressOut{Key: key, Serial: serial}, err
}

func (l *stressLedger) component(instance string) surface.Component {
	return surface.Component{
		Type: stressType, InstanceID: instance, Description: "Stress widget " + instance,
		Observations: map[string]surface.Capability{
			"read": surface.Observation(surface.ObservationDef[stressOut]{
				Description: "Reads the widget",
				Read:        l.handle,
			}),
		},
		Actions: map[string]surface.Capability{
			"act": surface.Action(surface.ActionDef[stressIn, stressOut]{
				Description: "Acts on the widget",
				Effect:      surface.EffectLocalState,
				Execute: func(ctx context.Context, call *surface.Call, _ stressIn) (stressOut, error) {
					return l.handle(ctx, call)
				},
			}),
		},
	}
}

// stressRegIDs publishes the registration ids the mounter has handed out:
// the live one per instance ("" when unmounted) and every earlier one.
type stressRegIDs struct {
	mu    sync.Mutex
	live  map[string]string
	stale []string
}

func (s *stressRegIDs) pick(rng *rand.Rand, instance string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rng.IntN(3) > 0 || len(s.stale) == 0 {
		if id := s.live[instance]; id != "" {
			return id
		}
		for _, id := range s.live {
			if id != "" {
				return id
			}
		}
	}
	if len(s.stale) == 0 {
		return ""
	}
	return s.stale[rng.IntN(len(s.stale))]
}

// stressCall is what one call sent and got.
type stressCall struct {
	key      string // consumer key + " " + the result's invocation id
	id       string // the result's invocation id
	identity string // the request, canonically (what the fingerprint covers)
	code     surface.Code
	envelope string // the JSON of the result
	ctxDone  bool   // the caller's own context had ended when Invoke returned
	serial   int64  // ok results: the execution serial
}

// stressReport collects failures from many goroutines, keeping the first
// few messages.
type stressReport struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (r *stressReport) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if len(r.first) < 25 {
		r.first = append(r.first, fmt.Sprintf(format, args...))
	}
}

// stressSeed seeds TestInvokeStress's random choices; each run logs the
// seed it used. The interleaving of goroutines still varies from run to
// run.
var stressSeed = flag.Uint64("stress.seed", 0, "seed of TestInvokeStress (0: a fresh one, logged)")

func runInvokeStress(t *testing.T, cfg stressConfig) {
	seed := *stressSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -stress.seed=%d)", seed, seed)
	ledger := newStressLedger(cfg.strict, seed)
	lim := cfg.limits
	lim.ActionQueueDepth = 2
	lim.MaxConcurrentObservationsPerConsumer = 2
	lim.MaxConcurrentObservationsTotal = 4
	lim.MaxQueuedObservationsPerConsumer = 2
	reg := surfacetest.NewRegistry(t, &surface.Options{OnDuplicate: surface.DuplicateReplace, Limits: lim, IsolateHandlers: cfg.isolate})

	const budget = 30 * time.Second // generous: a healthy run takes a few seconds under -race
	wctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()

	events := newStressEvents()
	unsubscribe := reg.Subscribe(events.record)
	defer unsubscribe()

	regIDs := &stressRegIDs{live: map[string]string{}}
	mount := func(instance string) *surface.Handle {
		h, err := reg.Register(ledger.component(instance))
		if err != nil {
			t.Errorf("Register(%s): %v", instance, err)
			return nil
		}
		regIDs.mu.Lock()
		if old := regIDs.live[instance]; old != "" {
			regIDs.stale = append(regIDs.stale, old)
		}
		regIDs.live[instance] = h.ID()
		regIDs.mu.Unlock()
		return h
	}
	handles := map[string]*surface.Handle{}
	for _, in := range stressInstances[:2] {
		handles[in] = mount(in)
	}

	// The mounter: replace, unmount, remount, disable and enable instances
	// until the workers are done.
	stop := make(chan struct{})
	mounterDone := make(chan struct{})
	go func() {
		defer close(mounterDone)
		rng := rand.New(rand.NewPCG(seed, 1<<33))
		for {
			select {
			case <-stop:
				return
			default:
			}
			in := stressInstances[rng.IntN(len(stressInstances))]
			switch op := rng.IntN(10); {
			case op < 5: // mount or replace
				if h := mount(in); h != nil {
					handles[in] = h
				}
			case op < 7:
				if h := handles[in]; h != nil {
					h.Unregister()
					regIDs.mu.Lock()
					if regIDs.live[in] == h.ID() {
						regIDs.stale = append(regIDs.stale, h.ID())
						regIDs.live[in] = ""
					}
					regIDs.mu.Unlock()
					handles[in] = nil
				}
			default:
				if h := handles[in]; h != nil {
					h.Update(surface.Update{Disabled: new(op == 7 && rng.IntN(2) == 0)})
				}
			}
			time.Sleep(time.Duration(200+rng.IntN(1500)) * time.Microsecond)
		}
	}()

	var (
		report  stressReport
		opCount atomic.Int64
		wg      sync.WaitGroup
		results = make([][]stressCall, stressWorkers)
	)
	for w := range stressWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			calls := make([]stressCall, 0, cfg.ops)
			for n := range cfg.ops {
				calls = append(calls, stressOne(wctx, reg, rng, w, n, &opCount, regIDs, ledger, &report))
			}
			results[w] = calls
		}()
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(budget + 10*time.Second):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		cancel()
		close(stop)
		t.Fatalf("the workload did not finish within %v: deadlock? goroutines:\n%s", budget, buf)
	}
	close(stop)
	<-mounterDone
	if wctx.Err() != nil {
		t.Fatalf("the workload ran into its %v deadline: calls hung until their context ended", budget)
	}

	var all []stressCall
	for _, calls := range results {
		all = append(all, calls...)
	}
	if got, want := len(all), stressWorkers*cfg.ops; got != want {
		t.Fatalf("%d results for %d calls", got, want)
	}
	checkStressCalls(t, cfg, all, ledger, &report)
	events.check(all, &report)

	ledger.mu.Lock()
	for _, v := range ledger.violations {
		report.fail("%s", v)
	}
	nExec := len(ledger.execs)
	ledger.mu.Unlock()
	if report.n > 0 {
		t.Errorf("%d failures; the first ones:\n%s", report.n, strings.Join(report.first, "\n"))
	}

	hist := map[surface.Code]int{}
	for _, c := range all {
		hist[c.code]++
	}
	var codes []string
	for c, n := range hist {
		name := string(c)
		if c == "" {
			name = "ok"
		}
		codes = append(codes, fmt.Sprintf("%s=%d", name, n))
	}
	slices.Sort(codes)
	t.Logf("%d calls, %d handler executions: %s", len(all), nExec, strings.Join(codes, " "))
	if hist[""] == 0 || hist[surface.CodeInvocationConflict] == 0 {
		t.Errorf("the workload produced no ok results or no conflicts: %v", hist)
	}
}

// stressOne makes one call and checks its result on its own.
func stressOne(wctx context.Context, reg *surface.Registry, rng *rand.Rand, w, n int,
	opCount *atomic.Int64, regIDs *stressRegIDs, ledger *stressLedger, report *stressReport) stressCall {
	seq := opCount.Add(1)

	// The invocation id: fresh, minted, from this worker's pool or from a
	// pool all workers share (rotating, so that concurrent joins keep
	// happening), and the request: random, or for pooled ids usually one
	// fixed by the id so that joins and replays outnumber conflicts.
	var id string
	pooled := false
	switch k := rng.IntN(20); {
	case k < 6:
		id = fmt.Sprintf("f-%d-%d", w, n)
	case k < 8:
		id = "" // minted
	case k < 13:
		id, pooled = fmt.Sprintf("w%d-%d", w, rng.IntN(4)), true
	default:
		id, pooled = fmt.Sprintf("s%d-%d", seq/48, rng.IntN(3)), true
	}
	consumer := stressConsumers[rng.IntN(len(stressConsumers))]

	var capID, instance, regID string
	input := stressInputs[rng.IntN(len(stressInputs))]
	if pooled && rng.IntN(4) > 0 {
		h := fnv32(id)
		capID = []string{stressRead, stressAct}[h%2]
		instance = stressInstances[(h/2)%uint32(len(stressInstances))]
		input = stressInputs[(h/8)%uint32(len(stressInputs))]
		// Any spelling of the same input: the same request.
		variants := slices.DeleteFunc(slices.Clone(stressInputs), func(x stressInput) bool { return x.label != input.label })
		input = variants[rng.IntN(len(variants))]
	} else {
		switch k := rng.IntN(20); {
		case k < 9:
			capID = stressRead
		case k < 18:
			capID = stressAct
		case k == 18:
			capID = "view:stress.widget.missing"
		default:
			capID = "view:Bad id!"
		}
		switch k := rng.IntN(10); {
		case k < 7:
			instance = stressInstances[rng.IntN(len(stressInstances))]
		case k < 9:
			instance = ""
		default:
			instance = "zzz"
		}
		if rng.IntN(3) == 0 {
			regID = regIDs.pick(rng, instance)
		}
	}
	inv := surface.Invocation{InvocationID: id, CapabilityID: capID, InstanceID: instance, RegistrationID: regID}
	if input.raw != "" {
		inv.Input = json.RawMessage(input.raw)
	}
	opts := surface.InvokeOptions{Consumer: consumer}
	switch rng.IntN(4) {
	case 0:
		opts.Timeout = 2 * time.Millisecond
	case 1:
		opts.Timeout = 300 * time.Microsecond
	}
	ctx := wctx
	if rng.IntN(5) == 0 { // this caller gives up early
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(wctx, time.Duration(200+rng.IntN(2500))*time.Microsecond)
		defer cancel()
	}

	res := reg.Invoke(ctx, inv, opts)

	call := stressCall{
		identity: strings.Join([]string{capID, instance, regID, input.label}, "\x00"),
		ctxDone:  ctx.Err() != nil,
	}
	call.key = consumer.Key() + " " + res.InvocationID
	call.id = res.InvocationID
	where := fmt.Sprintf("call %s %s (instance %q, registration %q, input %q)", call.key, capID, instance, regID, input.raw)

	b, err := json.Marshal(res)
	switch {
	case err != nil:
		report.fail("%s: json.Marshal(result): %v", where, err)
	case !json.Valid(b):
		report.fail("%s: result JSON is invalid: %s", where, b)
	}
	call.envelope = string(b)
	if res.CapabilityID != capID {
		report.fail("%s: capabilityId %q, want the request's", where, res.CapabilityID)
	}
	switch {
	case id != "" && res.InvocationID != id:
		report.fail("%s: invocationId %q, want %q", where, res.InvocationID, id)
	case id == "" && (!strings.HasPrefix(res.InvocationID, "inv_") || len(res.InvocationID) != 16):
		report.fail("%s: minted invocationId %q is not inv_ + 12 characters", where, res.InvocationID)
	}
	if _, err := strconv.ParseUint(res.SurfaceVersion, 10, 64); err != nil {
		report.fail("%s: surfaceVersion %q is not a decimal", where, res.SurfaceVersion)
	}

	switch res.Status {
	case surface.StatusOK:
		if res.Error != nil {
			report.fail("%s: ok result with an error: %s", where, b)
			break
		}
		var out stressOut
		if err := json.Unmarshal([]byte(res.Output), &out); err != nil {
			report.fail("%s: ok output %q: %v", where, res.Output, err)
			break
		}
		call.serial = out.Serial
		if out.Key != call.key {
			report.fail("%s: ok output belongs to key %q", where, out.Key)
		}
		ledger.mu.Lock()
		x := ledger.execs[out.Serial]
		ledger.mu.Unlock()
		switch {
		case x == nil:
			report.fail("%s: ok output names serial %d, which never executed", where, out.Serial)
		case x.key != call.key || x.capID != capID:
			report.fail("%s: ok output names serial %d, an execution of %q %s", where, out.Serial, x.key, x.capID)
		case !x.ok:
			report.fail("%s: ok result for serial %d, whose handler failed", where, out.Serial)
		}
	case surface.StatusError:
		e := res.Error
		if e == nil {
			report.fail("%s: error result without an error: %s", where, b)
			break
		}
		call.code = e.Code
		if !allCodes[e.Code] {
			report.fail("%s: code %q is not in the closed set", where, e.Code)
		} else if !stressPossible[e.Code] {
			report.fail("%s: code %s cannot happen in this workload: %s", where, e.Code, b)
		}
		if !allRetries[e.Retry] {
			report.fail("%s: retry %q is not in the closed set", where, e.Retry)
		}
		if n := len(utf16.Encode([]rune(e.Message))); n == 0 || n > 300 {
			report.fail("%s: message of %d UTF-16 units: %q", where, n, e.Message)
		}
		if strings.Contains(e.Message, "secrets") || strings.Contains(e.Message, "panic") {
			report.fail("%s: message leaks a handler error: %q", where, e.Message)
		}
	default:
		report.fail("%s: status %q", where, res.Status)
	}
	return call
}

// checkStressCalls runs the per-key checks over all calls.
func checkStressCalls(t *testing.T, cfg stressConfig, all []stressCall, ledger *stressLedger, report *stressReport) {
	t.Helper()
	byKey := map[string][]stressCall{}
	for _, c := range all {
		byKey[c.key] = append(byKey[c.key], c)
	}
	var joinsOrReplays int
	for key, calls := range byKey {
		identities := map[string]bool{}
		conflicts := 0
		for _, c := range calls {
			identities[c.identity] = true
			if c.code == surface.CodeInvocationConflict {
				conflicts++
			}
		}
		if conflicts > 0 && len(identities) < 2 {
			report.fail("key %q: %d INVOCATION_CONFLICT results although every call sent the same request %q", key, conflicts, calls[0].identity)
		}
		if !cfg.strict {
			continue
		}
		envelopes := map[string]string{} // cacheable envelope → identity of the callers
		serials := map[int64]bool{}
		for _, c := range calls {
			if c.serial != 0 {
				serials[c.serial] = true
			}
			if neverCached(c.code) || (c.code == surface.CodeCancelled && c.ctxDone) {
				continue
			}
			if id, seen := envelopes[c.envelope]; seen {
				joinsOrReplays++
				if id != c.identity {
					report.fail("key %q: result %s went to two different requests %q and %q", key, c.envelope, id, c.identity)
				}
				continue
			}
			envelopes[c.envelope] = c.identity
		}
		if len(envelopes) > 1 {
			report.fail("key %q: %d different cacheable results inside the dedupe window: %v", key, len(envelopes), slices.Collect(maps.Keys(envelopes)))
		}
		if len(serials) > 1 {
			report.fail("key %q: ok results of %d different executions %v", key, len(serials), serials)
		}
	}
	if cfg.strict {
		t.Logf("%d keys, %d joined or replayed results", len(byKey), joinsOrReplays)
	}
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// stressEvents checks the invocation events a listener sees.
type stressEvents struct {
	mu       sync.Mutex
	started  map[string]int
	settled  map[string]map[surface.Code]int // "" for ok
	version  int64
	problems []string
}

func newStressEvents() *stressEvents {
	return &stressEvents{started: map[string]int{}, settled: map[string]map[surface.Code]int{}, version: -1}
}

func (ev *stressEvents) record(e surface.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	problem := func(format string, args ...any) {
		if len(ev.problems) < 10 {
			ev.problems = append(ev.problems, fmt.Sprintf(format, args...))
		}
	}
	switch e := e.(type) {
	case surface.InvocationStarted:
		ev.started[e.InvocationID]++
	case surface.InvocationSettled:
		key := e.InvocationID
		m := ev.settled[key]
		if m == nil {
			m = map[surface.Code]int{}
			ev.settled[key] = m
		}
		m[e.Code]++
		n := 0
		for _, c := range m {
			n += c
		}
		if n > ev.started[key] {
			problem("invocation-settled #%d for %q delivered before its invocation-started", n, key)
		}
		if (e.Status == surface.StatusOK) != (e.Code == "") {
			problem("invocation-settled for %q: status %q with code %q", key, e.Status, e.Code)
		}
	case surface.SurfaceChanged:
		v, err := strconv.ParseInt(e.SurfaceVersion, 10, 64)
		if err != nil || v <= ev.version {
			problem("surface-changed version %q after %d", e.SurfaceVersion, ev.version)
		}
		ev.version = v
	}
}

// check compares the events with the calls made, once all have returned.
func (ev *stressEvents) check(all []stressCall, report *stressReport) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, p := range ev.problems {
		report.fail("events: %s", p)
	}
	calls := map[string]int{}
	results := map[string]map[surface.Code]int{}
	for _, c := range all {
		calls[c.id]++
		m := results[c.id]
		if m == nil {
			m = map[surface.Code]int{}
			results[c.id] = m
		}
		m[c.code]++
	}
	for key, n := range calls {
		settled := 0
		for code, k := range ev.settled[key] {
			settled += k
			if k > results[key][code] {
				report.fail("events: %d invocation-settled %q for %q, but only %d calls got that result", k, code, key, results[key][code])
			}
		}
		if started := ev.started[key]; started != settled || settled < 1 || settled > n {
			report.fail("events: %q: %d calls, %d invocation-started, %d invocation-settled", key, n, started, settled)
		}
	}
	for key := range ev.started {
		if calls[key] == 0 {
			report.fail("events: invocation-started for %q, which no call used", key)
		}
	}
}
