package loyalty

import (
	"errors"
	"strings"
	"testing"

	"github.com/tallyhq/tally/internal/apierr"
)

func p[T any](v T) *T { return &v }

// A balance request checks itself against the clock it is given, and says
// what is wrong in a 400; what it accepts is the change the ledger writes.
func TestBalanceRequestValidate(t *testing.T) {
	now := day("2026-06-01")
	for _, tc := range []struct {
		name string
		r    BalanceRequest
		want BalanceChange
		err  string // a part of the 400's details; "" when accepted
	}{
		{name: "add by the program's rules", r: BalanceRequest{Points: p[int64](5)}, want: BalanceChange{Points: 5, ByProgram: true}},
		{name: "remove", r: BalanceRequest{Points: p[int64](-5), Reason: p("r")}, want: BalanceChange{Points: -5, ByProgram: true, Reason: p("r")}},
		{name: "never expiring", r: BalanceRequest{Points: p[int64](5), ExpirationType: p("NON_EXPIRING")}, want: BalanceChange{Points: 5}},
		{name: "custom date", r: BalanceRequest{Points: p[int64](5), ExpirationType: p("CUSTOM_DATE"), ExpirationDate: p("2026-06-02")},
			want: BalanceChange{Points: 5, Custom: p(day("2026-06-02"))}},
		{name: "no points", r: BalanceRequest{}, err: "points is required"},
		{name: "zero points", r: BalanceRequest{Points: p[int64](0)}, err: "points is required"},
		{name: "too many points", r: BalanceRequest{Points: p[int64](1_000_000_001)}, err: "±1000000000"},
		{name: "date without custom", r: BalanceRequest{Points: p[int64](5), ExpirationDate: p("2026-06-02")}, err: "goes with expiration_type CUSTOM_DATE"},
		{name: "custom without date", r: BalanceRequest{Points: p[int64](5), ExpirationType: p("CUSTOM_DATE")}, err: "is required with expiration_type"},
		{name: "custom date today", r: BalanceRequest{Points: p[int64](5), ExpirationType: p("CUSTOM_DATE"), ExpirationDate: p("2026-06-01")}, err: "in the future"},
		{name: "custom date not a date", r: BalanceRequest{Points: p[int64](5), ExpirationType: p("CUSTOM_DATE"), ExpirationDate: p("soon")}, err: "must be a date"},
		{name: "custom on removal", r: BalanceRequest{Points: p[int64](-5), ExpirationType: p("CUSTOM_DATE"), ExpirationDate: p("2026-07-01")}, err: "added points"},
		{name: "unknown type", r: BalanceRequest{Points: p[int64](5), ExpirationType: p("SOMETIMES")}, err: "expiration_type must be"},
		{name: "reason too long", r: BalanceRequest{Points: p[int64](5), Reason: p(strings.Repeat("r", 1001))}, err: "reason is at most 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.r.Validate(now)
			if tc.err != "" {
				var e *apierr.Error
				if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Details, tc.err) {
					t.Fatalf("want a 400 saying %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Points != tc.want.Points || got.ByProgram != tc.want.ByProgram || !samePtr(got.Reason, tc.want.Reason) ||
				!samePtr(got.SourceID, tc.want.SourceID) || !samePtr(got.Custom, tc.want.Custom) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func samePtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// A transfer's body names 1 to 100 source cards, each with a code and a
// positive number of points.
func TestTransfersValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		rs   Transfers
		err  string
	}{
		{name: "one", rs: Transfers{{Code: "A", Points: 1}}},
		{name: "none", rs: Transfers{}, err: "1 to 100"},
		{name: "too many", rs: make(Transfers, 101), err: "1 to 100"},
		{name: "no code", rs: Transfers{{Code: "A", Points: 1}, {Points: 1}}, err: "[1].code is required"},
		{name: "no points", rs: Transfers{{Code: "A"}}, err: "[0].points"},
		{name: "negative", rs: Transfers{{Code: "A", Points: -1}}, err: "[0].points"},
		{name: "source_id too long", rs: Transfers{{Code: "A", Points: 1, SourceID: p(strings.Repeat("s", 1001))}}, err: "[0].source_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rs.Validate()
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var e *apierr.Error
			if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Details, tc.err) {
				t.Fatalf("want a 400 saying %q, got %v", tc.err, err)
			}
		})
	}
}
