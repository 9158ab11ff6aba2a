package exports

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/dbtest"
)

// A metadata key is data whatever the session's string syntax: with
// standard_conforming_strings off (a server, database or role setting), a
// backslash in a '…' literal escapes the quote after it, and a key built to
// close the literal must still select nothing it does not name.
func TestAMetadataKeyIsDataWithoutStandardConformingStrings(t *testing.T) {
	if dbtest.Engine() != "postgres" {
		t.Skip("CockroachDB's strings are always standard")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.Shared(t, "metadata-sql").NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE t (id TEXT, metadata JSONB);
		INSERT INTO t VALUES ('a', '{"shelf": "A"}'), ('b', '{"shelf": "B"}')`); err != nil {
		t.Fatal(err)
	}
	o := builtins[Voucher] // its metadata is t.metadata
	for _, scs := range []string{"on", "off"} {
		if _, err := conn.Exec(ctx, `SET standard_conforming_strings = `+scs); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{`shelf`, `\' IS NULL OR $1::text IS NULL OR TRUE --`, `it's`, `x\`} {
			raw, _ := json.Marshal(map[string]any{"metadata." + key: map[string]any{"$is": "A"}})
			fields := o.metadataFilters(raw)
			if _, ok := fields["metadata."+key]; !ok {
				t.Fatalf("%q: no filter", key)
			}
			col := fields["metadata."+key].Column
			want := 0
			if key == "shelf" {
				want = 1
			}
			var n int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM t WHERE `+col+` = $1`, "A").Scan(&n)
			if err != nil || n != want {
				t.Errorf("standard_conforming_strings %s, key %q, column %s: %d rows, %v; want %d", scs, key, col, n, err, want)
			}
		}
	}
}
