package domain_test

import (
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentsurface/agentsurface/examples/devices/domain"
)

// A pairing is kept by name, replaced by a later one of the same name,
// and read back as it was saved, also by another Store on the database
// (another replica, or the next run); several Stores making the table at
// once make it once. What is stored are hashes: the table has no column
// a credential could be in.
func TestPairings(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		db := b.newDB(t)
		s1, s2 := db.open(t), db.open(t)
		if _, err := s1.Pairing(bg, ""); !errors.Is(err, domain.ErrNoPairing) {
			t.Fatalf("before any: %v", err)
		}
		created := time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC)
		p := domain.Pairing{SessionID: "s_abc", Cookie: sha256.Sum256([]byte("c")), Token: sha256.Sum256([]byte("t")), Join: sha256.Sum256([]byte("j")), Created: created}
		other := p
		other.Name, other.SessionID = "replica-2", "s_def"
		var wg sync.WaitGroup
		for _, q := range []struct {
			s *domain.Store
			p domain.Pairing
		}{{s1, p}, {s2, other}} {
			wg.Go(func() {
				if err := q.s.SavePairing(bg, q.p); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got, err := s2.Pairing(bg, ""); err != nil || got != p {
			t.Fatalf("read back: %+v %v, want %+v", got, err, p)
		}
		if got, err := s1.Pairing(bg, "replica-2"); err != nil || got != other {
			t.Fatalf("the other: %+v %v", got, err)
		}
		p2 := p
		p2.SessionID, p2.Token = "s_new", sha256.Sum256([]byte("t2"))
		if err := s2.SavePairing(bg, p2); err != nil {
			t.Fatal(err)
		}
		if got, err := s1.Pairing(bg, ""); err != nil || got != p2 {
			t.Fatalf("replaced: %+v %v", got, err)
		}
		if err := s1.SavePairing(bg, domain.Pairing{Name: "x"}); !errors.Is(err, domain.ErrInvalid) {
			t.Fatalf("no session id: %v", err)
		}
		rows, err := db.raw.Query(`SELECT * FROM console_pairings`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		rows.Close()
		for _, c := range cols {
			if c != "name" && c != "session_id" && c != "created_at" && c[len(c)-7:] != "_sha256" {
				t.Fatalf("a column %q", c)
			}
		}
	})
}
