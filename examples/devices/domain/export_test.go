package domain

import "time"

// SetClock makes s read the time from now. Call it before s is used.
func SetClock(s *Store, now func() time.Time) { s.now = now }
