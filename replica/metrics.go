package replica

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the OpenTelemetry instrumentation scope of this package's
// metrics.
const ScopeName = "github.com/agentsurface/agentsurface/replica"

// outcome is what became of a request the forwarding handler saw, or a
// lease event.
type outcome int

const (
	outcomeLocal       outcome = iota // served here: this replica owns the session, or it names none
	outcomeForwarded                  // proxied to the owner
	outcomeReceived                   // forwarded here by another replica
	outcomeEnded                      // no live owner
	outcomeUnavailable                // the directory could not be read
	outcomeUnreachable                // the owner could not be reached
	outcomeFailed                     // the owner failed before answering
	outcomeGone                       // the owner's lease ran out before it answered
	outcomeTimeout                    // the owner did not answer in time
	outcomeBadHop                     // a forwarded request failed authentication
	outcomeLeaseLost                  // this replica lost its lease
	outcomePastLease                  // a request for a session of this replica after its lease's deadline
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"local", "forwarded", "received", "ended", "directory_unavailable",
	"owner_unreachable", "owner_failed", "owner_gone", "owner_timeout", "bad_hop", "lease_lost", "past_lease"}

// stats counts outcomes.
type stats struct {
	mu sync.Mutex
	n  [numOutcomes]uint64
}

func (s *stats) add(o outcome) {
	s.mu.Lock()
	s.n[o]++
	s.mu.Unlock()
}

// counts returns a copy of the counts.
func (s *stats) counts() [numOutcomes]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Stats counts what the directory and its forwarding handlers did since
// the directory opened.
type Stats struct {
	Local       uint64 // requests served here (owned here, or naming no session)
	Forwarded   uint64 // requests proxied to their owner (answered by it, whatever the status)
	Received    uint64 // requests other replicas forwarded here
	Ended       uint64 // requests for a session with no live owner
	Unavailable uint64 // requests answered 503 because the directory could not be read
	Unreachable uint64 // requests answered 503 because the owner could not be reached
	Failed      uint64 // requests whose owner failed before answering (502)
	Gone        uint64 // requests whose owner's lease ran out before it answered (502)
	Timeout     uint64 // requests whose owner did not answer in time (504)
	BadHops     uint64 // forwarded requests refused: bad signature, stale or malformed (403)
	LeasesLost  uint64 // times this replica lost its lease
	PastLease   uint64 // requests for its own sessions refused after its lease's deadline (503)
}

// Stats returns the directory's counters.
func (d *Directory) Stats() Stats {
	s := d.stats.counts()
	return Stats{
		Local: s[outcomeLocal], Forwarded: s[outcomeForwarded], Received: s[outcomeReceived],
		Ended: s[outcomeEnded], Unavailable: s[outcomeUnavailable],
		Unreachable: s[outcomeUnreachable], Failed: s[outcomeFailed], Gone: s[outcomeGone],
		Timeout: s[outcomeTimeout], BadHops: s[outcomeBadHop], LeasesLost: s[outcomeLeaseLost],
		PastLease: s[outcomePastLease],
	}
}

// Metric names.
const (
	metricRequests = "agentsurface.replica.requests"
	metricSessions = "agentsurface.replica.sessions"
	metricAudit    = "agentsurface.audit.records"
	metricQueue    = "agentsurface.audit.queue"
)

// registerMetrics makes the directory's observable instruments; they read
// the counters when collected, so requests pay nothing for them.
func (d *Directory) registerMetrics(mp metric.MeterProvider) metric.Registration {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	requests, err1 := m.Int64ObservableCounter(metricRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests seen by the forwarding handler, and lease losses, by outcome."))
	sessions, err2 := m.Int64ObservableGauge(metricSessions, metric.WithUnit("{key}"),
		metric.WithDescription("Session keys this replica owns."))
	if err1 != nil || err2 != nil {
		d.log.Warn("replica: the meter provider refused an instrument; metrics are incomplete", "error", err1, "error2", err2)
	}
	sets := make([]metric.ObserveOption, numOutcomes)
	for i, n := range outcomeNames {
		sets[i] = metric.WithAttributes(attribute.String("agentsurface.replica.outcome", n))
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if requests != nil {
			for i, n := range d.stats.counts() {
				o.ObserveInt64(requests, int64(n), sets[i])
			}
		}
		if sessions != nil {
			o.ObserveInt64(sessions, int64(d.owned.count()))
		}
		return nil
	}, requests, sessions)
	if err != nil {
		d.log.Warn("replica: cannot register the metrics callback", "error", err)
		return nil
	}
	return reg
}
