package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"fortio.org/fortio/periodic"

	"github.com/tallyhq/tally/devstack"
)

// rewardsResult is the rewards section's figures: CAMPAIGN reward
// redemptions through the router at 200/s, each publishing a new discount
// voucher to the member (or crediting their gift card) with the points'
// POINTS_REDEMPTION in one transaction.
type rewardsResult struct {
	members                   int
	discP50, discP95, discQPS float64
	giftP50, giftP95, giftQPS float64
	discErrs, giftErrs        int64
}

// rewardCall redeems reward for the members in turn.
type rewardCall struct {
	c       client
	reward  string
	members []string
	next    *atomic.Int64
	errs    *atomic.Int64
}

func (r *rewardCall) Run(_ context.Context, _ periodic.ThreadID) (bool, string) {
	code := r.members[int(r.next.Add(1))%len(r.members)]
	body := strings.NewReader(`{"reward":{"id":"` + r.reward + `"}}`)
	res, err := r.c.send("POST", "/v1/loyalties/members/"+code+"/redemption", body, "application/json")
	if err != nil {
		r.errs.Add(1)
		return false, ""
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		if r.errs.Add(1) <= 3 {
			msg, _ := io.ReadAll(res.Body)
			fmt.Fprintf(os.Stderr, "bench: rewards: %d %s\n", res.StatusCode, msg)
		}
		return false, ""
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return true, ""
}

func benchRewards(stack *devstack.Stack, p devstack.ProjectCredentials, d time.Duration) (rewardsResult, error) {
	r := rewardsResult{members: 64}
	c := client{base: stack.RouterURL, p: p, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	fmt.Fprintln(os.Stderr, "bench: rewards: a program, its members, a discount and a gift campaign")
	prog, err := c.must("POST", "/v1/loyalties", map[string]any{"name": "Bench rewards", "vouchers_count": 0,
		"voucher": map[string]any{"type": "LOYALTY_CARD", "loyalty_card": map[string]any{"points": 0}}})
	if err != nil {
		return r, err
	}
	progID := prog["id"].(string)
	var members []string
	for i := range r.members {
		m, err := c.must("POST", "/v1/loyalties/"+progID+"/members", map[string]any{"customer": map[string]any{"source_id": fmt.Sprintf("bench-rw-%d", i)}})
		if err != nil {
			return r, err
		}
		code := m["code"].(string)
		if _, err := c.must("POST", "/v1/loyalties/members/"+code+"/balance", map[string]any{"points": 1_000_000_000}); err != nil {
			return r, err
		}
		members = append(members, code)
	}
	reward := func(name string, campaign map[string]any) (string, error) {
		camp, err := c.must("POST", "/v1/campaigns", campaign)
		if err != nil {
			return "", err
		}
		params := map[string]any{"id": camp["id"]}
		if campaign["campaign_type"] == "GIFT_VOUCHERS" {
			params["balance"] = 100
		}
		w, err := c.must("POST", "/v1/rewards", map[string]any{"name": name, "parameters": map[string]any{"campaign": params}})
		if err != nil {
			return "", err
		}
		_, err = c.must("POST", "/v1/rewards/"+w["id"].(string)+"/assignments", map[string]any{"campaign": progID,
			"parameters": map[string]any{"loyalty": map[string]any{"points": 10}}})
		return w["id"].(string), err
	}
	disc, err := reward("Bench voucher", map[string]any{"name": "Bench reward vouchers", "campaign_type": "DISCOUNT_COUPONS",
		"type": "AUTO_UPDATE", "vouchers_count": 0, "voucher": map[string]any{"type": "DISCOUNT_VOUCHER",
			"discount": map[string]any{"type": "AMOUNT", "amount_off": 500}, "code_config": map[string]any{"pattern": "BRW-########"}}})
	if err != nil {
		return r, err
	}
	gift, err := reward("Bench credits", map[string]any{"name": "Bench reward gift cards", "campaign_type": "GIFT_VOUCHERS",
		"type": "AUTO_UPDATE", "vouchers_count": 0, "voucher": map[string]any{"type": "GIFT_VOUCHER", "gift": map[string]any{"amount": 0},
			"code_config": map[string]any{"pattern": "BRG-########"}}})
	if err != nil {
		return r, err
	}
	run := func(rewardID string, errs *atomic.Int64) periodic.RunnerResults {
		var next atomic.Int64
		runners := make([]periodic.Runnable, 16)
		for i := range runners {
			runners[i] = &rewardCall{c: c, reward: rewardID, members: members, next: &next, errs: errs}
		}
		return at200(runners, d)
	}
	var discErrs, giftErrs atomic.Int64
	fmt.Fprintln(os.Stderr, "bench: rewards: a discount voucher for points at 200/s")
	dr := run(disc, &discErrs)
	r.discP50, r.discP95, _ = percentiles(dr)
	r.discQPS, r.discErrs = dr.ActualQPS, discErrs.Load()
	fmt.Fprintln(os.Stderr, "bench: rewards: gift card credits for points at 200/s")
	gr := run(gift, &giftErrs)
	r.giftP50, r.giftP95, _ = percentiles(gr)
	r.giftQPS, r.giftErrs = gr.ActualQPS, giftErrs.Load()
	return r, nil
}

func rewardsReport(r rewardsResult) string {
	var b strings.Builder
	b.WriteString("CAMPAIGN reward redemptions through the router at 200/s (`POST /v1/loyalties/members/{memberId}/redemption`, " +
		fmt.Sprintf("%d members in turn, 16 threads): the points' POINTS_REDEMPTION and what the reward gives in one transaction.\n\n", r.members))
	b.WriteString("| measure | target | measured | verdict |\n|---|---|---|---|\n")
	verdict := func(p50, p95 float64, errs int64) string {
		if p50 <= 10 && p95 <= 25 && errs == 0 {
			return "met"
		}
		return "missed"
	}
	fmt.Fprintf(&b, "| a new discount voucher published (%.0f/s achieved, %d errors), p50 / p95 | ≤ 10 / 25 ms | %.2f / %.2f ms | %s |\n",
		r.discQPS, r.discErrs, r.discP50, r.discP95, verdict(r.discP50, r.discP95, r.discErrs))
	fmt.Fprintf(&b, "| gift card credits (%.0f/s achieved, %d errors), p50 / p95 | ≤ 10 / 25 ms | %.2f / %.2f ms | %s |\n",
		r.giftQPS, r.giftErrs, r.giftP50, r.giftP95, verdict(r.giftP50, r.giftP95, r.giftErrs))
	return b.String()
}
