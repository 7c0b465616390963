package pgtest_test

import (
	"context"
	"testing"

	"github.com/agentsurface/agentsurface/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// A server started with Flush flushes its log at every commit, as
// PostgreSQL does by default; one started without does not.
func TestStartServerFlush(t *testing.T) {
	for _, flush := range []bool{false, true} {
		srv := pgtest.StartServer(t, &pgtest.ServerOptions{Flush: flush})
		conn, err := pgx.Connect(context.Background(), srv.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "off", true: "on"}[flush]
		for _, setting := range []string{"fsync", "full_page_writes"} {
			var got string
			if err := conn.QueryRow(context.Background(), "SHOW "+setting).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("Flush %v: %s = %s, want %s", flush, setting, got, want)
			}
		}
		conn.Close(context.Background())
	}
}
