package referrals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/webhooks"
)

const holderColumns = `id, voucher_id, campaign_id, customer_id, holder_role, metadata, created_at`

func scanHolder(r pgx.Row) (Holder, error) {
	var h Holder
	var meta []byte
	if err := r.Scan(&h.ID, &h.VoucherID, &h.CampaignID, &h.CustomerID, &h.Role, &meta, &h.CreatedAt); err != nil {
		return Holder{}, err
	}
	return h, json.Unmarshal(meta, &h.Metadata)
}

// queueHolder queues h's insert; a customer who holds the code already
// keeps the holding they have.
func queueHolder(b *pgx.Batch, projectID string, h Holder) {
	meta, _ := json.Marshal(h.Metadata)
	b.Queue(`INSERT INTO referral_holders (project_id, id, voucher_id, campaign_id, customer_id, holder_role, metadata, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (project_id, voucher_id, customer_id) DO NOTHING`,
		projectID, h.ID, h.VoucherID, h.CampaignID, h.CustomerID, h.Role, meta, h.CreatedAt)
}

// RecordReferrer is the vouchers.Hold (given to vouchers.NewService) that
// makes the holder of a referral code its referrer, in the transaction that
// publishes it to them; clk dates the holding.
func RecordReferrer(clk *clock.Clock) vouchers.Hold {
	return func(ctx context.Context, tx pgx.Tx, projectID string, v vouchers.Voucher) error {
		// Every read of a voucher joins its campaign's type (Referral), so
		// a code of another campaign costs no query here: this runs for
		// every voucher a publication or a CAMPAIGN reward gives.
		if v.CampaignID == nil || v.HolderID == nil || !v.Referral {
			return nil
		}
		c, err := campaigns.Get[json.RawMessage](ctx, tx, projectID, *v.CampaignID, false, "REFERRAL_PROGRAM")
		if errors.Is(err, db.ErrNotFound) {
			return nil // not a referral code
		}
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		queueHolder(b, projectID, Holder{ID: ids.New("rh_"), VoucherID: v.ID, CampaignID: c.ID, CustomerID: *v.HolderID, Role: Referrer,
			Metadata: map[string]any{}, CreatedAt: clk.Now().UTC().Truncate(time.Millisecond)})
		return tx.SendBatch(ctx, b).Close()
	}
}

// member finds the referral code ref names (ref.ID, its code or id), of
// the program ref.Campaign (id or name) when given: 404 otherwise, and for
// a voucher that is not a referral code.
func (s *Service) member(ctx context.Context, q db.Querier, ref campaigns.ItemRef) (vouchers.Voucher, vouchers.Campaign, error) {
	projectID, campaignKey, memberID := ref.Project, ref.Campaign, ref.ID
	v, c, _, err := s.referralCode(ctx, q, projectID, memberID)
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
		return v, c, apierr.NotFound("voucher", memberID)
	}
	if err == nil && campaignKey != "" && campaignKey != c.ID && campaignKey != c.Name {
		if _, cerr := campaigns.Get[json.RawMessage](ctx, q, projectID, campaignKey, false, "REFERRAL_PROGRAM"); cerr != nil {
			return v, c, apierr.NotFound("campaign", campaignKey)
		}
		return v, c, apierr.NotFound("voucher", memberID)
	}
	return v, c, err
}

// holderFields are what the holders list filters by.
var holderFields = map[string]filters.Field{
	"id":          {Kind: filters.String, Column: "id"},
	"created_at":  {Kind: filters.DateTime, Column: "created_at"},
	"holder_role": {Kind: filters.String, Column: "holder_role"},
	"customer_id": {Kind: filters.String, Column: "customer_id"},
}

// ListHolders returns a page of a referral code's holders, in id order
// (creation order) or its reverse, and their total.
func (s *Service) ListHolders(ctx context.Context, ref campaigns.ItemRef, lq listq.Query, f filters.Filter) ([]HolderView, int, bool, string, error) {
	projectID := ref.Project
	v, _, err := s.member(ctx, s.pool, ref)
	if err != nil {
		return nil, 0, false, "", err
	}
	where, args := `project_id = $1 AND voucher_id = $2`, []any{projectID, v.ID}
	if !f.Empty() {
		var cond string
		cond, args = f.SQL(holderFields, args, s.clock.Now())
		where += " AND " + cond
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM referral_holders WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, false, "", err
	}
	keyset, orderBy, args := lq.Keyset("referral_holders", "id", args)
	args = append(args, lq.Limit+1)
	hs, err := db.Collect(scanHolder)(s.pool.Query(ctx, `SELECT `+holderColumns+` FROM referral_holders WHERE `+where+keyset+
		` ORDER BY `+orderBy+` LIMIT $`+strconv.Itoa(len(args)), args...))
	if err != nil {
		return nil, 0, false, "", err
	}
	page, more, next := listq.PageOf(hs, lq.Limit, func(h Holder) string { return h.ID }, Holder.View)
	return page, total, more, next, nil
}

// maxHolders is the most referees one request adds.
const maxHolders = 100

// AddRequest is the body of POST …/members/{memberId}/holders.
type AddRequest struct {
	Holders  []json.RawMessage `json:"holders"`
	Metadata json.RawMessage   `json:"metadata"`
}

// AddHolders makes customers (upserted from the request, all or none)
// referees of a referral code and answers their holdings; a customer who
// holds the code already keeps their holding.
func (s *Service) AddHolders(ctx context.Context, ref campaigns.ItemRef, r AddRequest) ([]HolderView, error) {
	projectID := ref.Project
	if len(r.Holders) == 0 || len(r.Holders) > maxHolders {
		return nil, apierr.InvalidPayload(fmt.Sprintf("holders is a list of 1 to %d customers: {id} or {source_id, …}", maxHolders))
	}
	meta := map[string]any{}
	if len(r.Metadata) > 0 && string(r.Metadata) != "null" {
		if r.Metadata[0] != '{' || json.Unmarshal(r.Metadata, &meta) != nil {
			return nil, apierr.InvalidPayload("metadata must be an object")
		}
	}
	patches := make([]*customers.Patch, len(r.Holders))
	for i, raw := range r.Holders {
		patches[i] = &customers.Patch{}
		if err := json.Unmarshal(raw, patches[i]); err != nil || raw[0] != '{' {
			return nil, apierr.InvalidPayload(fmt.Sprintf("holders[%d] must be a customer object: {id} or {source_id, name, email, …}", i))
		}
		if patches[i].ID == nil && patches[i].SourceID == nil {
			return nil, apierr.InvalidPayload(fmt.Sprintf("holders[%d] needs an id or a source_id", i))
		}
	}
	var out []HolderView
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		out = nil
		v, c, err := s.member(ctx, tx, ref)
		if err != nil {
			return err
		}
		now := s.clock.Now().UTC().Truncate(time.Millisecond)
		for i, p := range patches {
			cust, _, err := s.customers.UpsertIn(ctx, tx, projectID, p)
			if err != nil {
				var ae *apierr.Error
				if errors.As(err, &ae) {
					ae.Details = fmt.Sprintf("holders[%d]: %s", i, ae.Details)
				}
				return err
			}
			if v.HolderID != nil && cust.ID == *v.HolderID {
				return ReferrerNotPermitted(v.Code)
			}
			b := &pgx.Batch{}
			id := ids.New("rh_")
			queueHolder(b, projectID, Holder{ID: id, VoucherID: v.ID, CampaignID: c.ID, CustomerID: cust.ID, Role: Referee,
				Metadata: meta, CreatedAt: now})
			var h Holder
			db.QueueEach(b, scanHolder, func(x Holder) { h = x }, `SELECT `+holderColumns+` FROM referral_holders
				WHERE project_id = $1 AND voucher_id = $2 AND customer_id = $3`, projectID, v.ID, cust.ID)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			if h.ID != id { // held before
				out = append(out, h.View())
				continue
			}
			if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventHolderAssigned, Entity: cust.ID,
				Object: map[string]any{"holder": h.View(),
					"voucher": simpleVoucher(v), "campaign": simpleCampaign(c), "customer": cust.Simple()}}); err != nil {
				return err
			}
			out = append(out, h.View())
		}
		return nil
	})
	return out, err
}

// RemoveHolder takes a referee off a referral code; its referrer stays
// (400), and a holder of another code is 404.
func (s *Service) RemoveHolder(ctx context.Context, ref campaigns.ItemRef, holderID string) error {
	projectID := ref.Project
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		v, c, err := s.member(ctx, tx, ref)
		if err != nil {
			return err
		}
		h, err := scanHolder(tx.QueryRow(ctx, `SELECT `+holderColumns+` FROM referral_holders
			WHERE project_id = $1 AND id = $2 AND voucher_id = $3 FOR UPDATE`, projectID, holderID, v.ID))
		if errors.Is(err, db.ErrNotFound) {
			return apierr.NotFound("redeemable_holder", holderID)
		}
		if err != nil {
			return err
		}
		if h.Role != Referee {
			return apierr.New(http.StatusBadRequest, "referrer_not_removable", "Referrer not removable",
				fmt.Sprintf("Holder %s is the referrer of %s: only referees are removed from a referral code.", h.ID, v.Code))
		}
		if _, err := tx.Exec(ctx, `DELETE FROM referral_holders WHERE project_id = $1 AND id = $2`, projectID, h.ID); err != nil {
			return err
		}
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventHolderUnassigned, Entity: h.CustomerID,
			Object: map[string]any{"holder": h.View(),
				"voucher": simpleVoucher(v), "campaign": simpleCampaign(c), "customer": map[string]any{"id": h.CustomerID, "object": "customer"}}})
	})
}

type handler struct{ svc *Service }

// Register mounts the holders endpoints on the /v1 group, with and
// without the campaign in the path.
func Register(g *echo.Group, s *Service) {
	h := handler{s}
	for _, p := range []string{"/referrals/members/:memberId/holders", "/referrals/:campaignId/members/:memberId/holders"} {
		g.GET(p, h.list)
		g.POST(p, h.add)
		g.DELETE(p+"/:holderId", h.remove)
	}
}

func (h handler) list(c echo.Context) error {
	q := c.QueryParams()
	lq, err := listq.Parse(q, listq.Spec{})
	if err != nil {
		return err
	}
	f, err := filters.Parse(q, holderFields)
	if err != nil {
		return err
	}
	hs, total, more, next, err := h.svc.ListHolders(c.Request().Context(), campaigns.ItemRefOf(c, "memberId"), lq, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, listq.List[HolderView]{Data: hs, Total: &total, More: more, Next: next})
}

func (h handler) add(c echo.Context) error {
	return httpx.WithBody(c, func(r AddRequest) (any, error) {
		hs, err := h.svc.AddHolders(c.Request().Context(), campaigns.ItemRefOf(c, "memberId"), r)
		return map[string]any{"holders": hs}, err
	})
}

func (h handler) remove(c echo.Context) error {
	if err := h.svc.RemoveHolder(c.Request().Context(), campaigns.ItemRefOf(c, "memberId"),
		c.Param("holderId")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
