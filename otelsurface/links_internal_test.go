package otelsurface

import (
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// The link store forgets lapsed requests and holds at most maxLinks.
func TestLinkStoreBounded(t *testing.T) {
	var s linkStore
	t0 := time.Unix(1000, 0)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	s.put("a", sc, t0.Add(time.Minute), t0)
	s.put("a", trace.SpanContext{}, t0.Add(time.Hour), t0) // the first requester stays
	if got, ok := s.get("a"); !ok || !got.Equal(sc) {
		t.Fatalf("a = %v %v", got, ok)
	}
	s.put("b", sc, t0.Add(2*time.Minute), t0.Add(30*time.Second))
	s.put("c", sc, t0.Add(3*time.Minute), t0.Add(90*time.Second)) // a lapsed at t0+1m
	if _, ok := s.get("a"); ok {
		t.Fatal("a lapsed but is kept")
	}
	s.drop("b")
	if _, ok := s.get("b"); ok || s.len() != 1 {
		t.Fatalf("b dropped but kept, or %d entries", s.len())
	}
	for i := range 3 * maxLinks {
		s.put(strconv.Itoa(i), sc, t0.Add(time.Hour), t0.Add(2*time.Minute))
		if i%7 == 0 {
			s.drop(strconv.Itoa(i))
		}
	}
	if n := s.len(); n > maxLinks {
		t.Fatalf("%d entries, want at most %d", n, maxLinks)
	}
	if len(s.order) > 2*maxLinks+1 {
		t.Fatalf("order holds %d ids", len(s.order))
	}
	if _, ok := s.get(strconv.Itoa(3*maxLinks - 1)); !ok {
		t.Fatal("the newest entry is gone")
	}
}
