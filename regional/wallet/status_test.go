package wallet_test

import (
	"testing"
	"time"

	"github.com/tallyhq/tally/regional/wallet"
)

func TestStatusIsTheFirstOfWhatKeepsARedeemableFromUse(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	for _, c := range []struct {
		s    wallet.State
		want string
	}{
		{wallet.State{Active: true}, wallet.Active},
		{wallet.State{Active: true, Start: &past, Expiration: &future}, wallet.Active},
		{wallet.State{Active: false, Start: &future, Used: true}, wallet.Disabled},
		{wallet.State{Active: true, Start: &future, Used: true}, wallet.NotActiveYet},
		{wallet.State{Active: true, Expiration: &past, NoBalance: true}, wallet.Expired},
		{wallet.State{Active: true, Expiration: &now}, wallet.Expired}, // the expiration date is not a day of use
		{wallet.State{Active: true, Start: &now}, wallet.Active},
		{wallet.State{Active: true, Used: true, NoBalance: true}, wallet.Used},
		{wallet.State{Active: true, NoBalance: true}, wallet.NoBalance},
	} {
		if got := c.s.Status(now); got != c.want {
			t.Errorf("%+v: %s, want %s", c.s, got, c.want)
		}
	}
}
