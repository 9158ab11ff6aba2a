package loyalty

import (
	"testing"
	"time"
)

// The ledger's pure rules, without a database: how each change moves a
// card's figures (when points expire is regional/loyalty/expiry's).

func day(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Each kind of change moves the figures it should, and the card's next
// expiration follows its buckets.
func TestLedgerFigures(t *testing.T) {
	may, june := day("2027-05-31"), day("2027-06-30")
	c := Card{}
	c.addPoints(Earned, 100, &june)
	c.addPoints(Earned, 50, &may)
	c.addPoints(Earned, 10, nil)
	if c.Points != 160 || c.Balance != 160 || !c.NextExpirationDate.Equal(may) || *c.NextExpirationPoints != 50 {
		t.Fatalf("after earning: %+v", c)
	}
	// Taking 70 empties May's bucket and takes 20 of June's.
	rest := []Bucket{{ID: "2027-06-30", Points: 80, ExpiresOn: &june}, {ID: "never", Points: 10}}
	c.takePoints(Redeemed, 70, rest)
	if c.RedeemedPoints != 70 || c.Balance != 90 || !c.NextExpirationDate.Equal(june) || *c.NextExpirationPoints != 80 {
		t.Fatalf("after redeeming: %+v", c)
	}
	c.takePoints(Subtracted, 5, []Bucket{{ID: "2027-06-30", Points: 75, ExpiresOn: &june}, {ID: "never", Points: 10}})
	if c.SubtractedPoints != 5 || c.Balance != 85 || *c.NextExpirationPoints != 75 {
		t.Fatalf("after subtracting: %+v", c)
	}
	// A rollback gives the May part back to May.
	c.addPoints(Refunded, 50, &may)
	if c.RedeemedPoints != 20 || c.Balance != 135 || c.Points != 160 || !c.NextExpirationDate.Equal(may) || *c.NextExpirationPoints != 50 {
		t.Fatalf("after refunding: %+v", c)
	}
	if b := c.BalanceAfter(0); b.Total != 155 || b.Balance != 135 {
		t.Fatalf("balance object: %+v", b)
	}
}
