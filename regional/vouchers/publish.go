package vouchers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/codes"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/regional/campaigns"
)

// What regional/publications asks of the vouchers it gives to customers:
// the vouchers table stays this package's own.

// ErrNoFreeVoucher is ClaimFree's answer for a campaign with no voucher
// suitable for publication (active, held by no one, not in the bin) that
// cannot make one (a STATIC campaign).
var ErrNoFreeVoucher = errors.New("vouchers: no voucher suitable for publication")

// CampaignIn finds a live discount or gift campaign by id or name in q
// (404 otherwise, another project's included).
func (s *Service) CampaignIn(ctx context.Context, q db.Querier, projectID, idOrName string) (Campaign, error) {
	return s.Campaign(ctx, q, projectID, idOrName, false)
}

// ClaimFree gives holderID a free voucher of c in tx: ClaimFreeN of one.
func (s *Service) ClaimFree(ctx context.Context, tx pgx.Tx, projectID string, c Campaign, holderID string) (Voucher, error) {
	vs, err := s.ClaimFreeN(ctx, tx, projectID, c, holderID, 1)
	if err != nil {
		return Voucher{}, err
	}
	return vs[0], nil
}

// ClaimFreeN gives holderID n free vouchers of c in tx, all or none: the
// first ones no other transaction holds locked (FOR UPDATE SKIP LOCKED,
// which PostgreSQL and CockroachDB since 22.2 accept), so concurrent
// publications of one campaign take distinct vouchers without waiting on
// each other. An AUTO_UPDATE campaign without enough free vouchers makes
// the rest from its template; a STATIC one answers ErrNoFreeVoucher, and
// then no voucher has been given.
func (s *Service) ClaimFreeN(ctx context.Context, tx pgx.Tx, projectID string, c Campaign, holderID string, n int) ([]Voucher, error) {
	free := func() ([]Voucher, error) {
		return db.Collect(scanVoucher)(tx.Query(ctx, freeVouchers, projectID, c.ID, n))
	}
	vs, err := free()
	if err != nil {
		return nil, err
	}
	if short := n - len(vs); short > 0 {
		if c.Attrs.Type != "AUTO_UPDATE" {
			return nil, ErrNoFreeVoucher
		}
		gen, gerr := codes.New(c.Attrs.Voucher.CodeConfig)
		if gerr != nil {
			return nil, gerr
		}
		if err := s.CheckGenerated(ctx, projectID, c); err != nil {
			return nil, err
		}
		if _, err := Generate(ctx, tx, projectID, c, gen.Next, int64(short), s.now()); err != nil {
			return nil, err
		}
		if err := campaigns.AddVouchersCount(ctx, tx, projectID, c.ID, int64(short)); err != nil {
			return nil, err
		}
		// The ones just made are invisible to other transactions until
		// commit; those this one locked are not skipped.
		if vs, err = free(); err != nil {
			return nil, err
		}
		if len(vs) < n {
			return nil, ErrNoFreeVoucher
		}
	}
	for i := range vs {
		if err := s.hold(ctx, tx, projectID, &vs[i], holderID); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// ClaimCode gives holderID the voucher with code (or id) in tx. A voucher
// another customer holds is 400 voucher_already_published; held says
// holderID held it already.
func (s *Service) ClaimCode(ctx context.Context, tx pgx.Tx, projectID, code, holderID string) (v Voucher, held bool, err error) {
	v, err = getVoucher(ctx, tx, projectID, code, true)
	if err != nil {
		return Voucher{}, false, err
	}
	if v.HolderID != nil && *v.HolderID != holderID {
		return Voucher{}, false, apierr.New(http.StatusBadRequest, "voucher_already_published", "Voucher already published",
			fmt.Sprintf("Voucher %s is already published to another customer.", v.Code))
	}
	held = v.HolderID != nil
	return v, held, s.hold(ctx, tx, projectID, &v, holderID)
}

func (s *Service) hold(ctx context.Context, tx pgx.Tx, projectID string, v *Voucher, holderID string) error {
	now := s.now()
	v.HolderID, v.UpdatedAt = &holderID, &now
	if _, err := tx.Exec(ctx, `UPDATE vouchers SET holder_id = $3, updated_at = $4 WHERE project_id = $1 AND id = $2`,
		projectID, v.ID, holderID, now); err != nil {
		return err
	}
	if s.onGiven != nil {
		return s.onGiven(ctx, tx, projectID, *v)
	}
	return nil
}

// QueueByIDs queues onto b the read of the vouchers with ids (those in
// the bin included, as a publication still names them); into runs for
// each found.
func QueueByIDs(b *pgx.Batch, projectID string, ids []string, into func(Voucher)) {
	db.QueueEach(b, scanVoucher, into, `SELECT `+voucherColumns+voucherFrom+`
		WHERE v.project_id = $1 AND v.id = ANY($2::TEXT[])`, projectID, ids)
}

// ExpireBy makes v expire at at, or keeps its own expiration when that is
// earlier: a publication that asks for an expiration (Tally's
// expiration_date on POST /v1/publications, which the client-side API
// allows behind client_set_voucher_expiration_date_enabled) only ever
// shortens a voucher's life. at must be after the voucher's start_date.
func (s *Service) ExpireBy(ctx context.Context, tx pgx.Tx, projectID string, v *Voucher, at time.Time) error {
	at = at.UTC().Truncate(time.Millisecond)
	if v.Attrs.StartDate != nil && !at.After(*v.Attrs.StartDate) {
		return apierr.InvalidPayload(fmt.Sprintf("expiration_date must be after voucher %s's start_date (%s)",
			v.Code, v.Attrs.StartDate.UTC().Format(time.RFC3339)))
	}
	if v.Attrs.ExpirationDate != nil && !v.Attrs.ExpirationDate.After(at) {
		return nil
	}
	v.Attrs.ExpirationDate = &at
	attrs, err := json.Marshal(v.Attrs)
	if err != nil {
		return err
	}
	now := s.now()
	v.UpdatedAt = &now
	_, err = tx.Exec(ctx, `UPDATE vouchers SET attrs = $3, updated_at = $4 WHERE project_id = $1 AND id = $2`, projectID, v.ID, attrs, now)
	return err
}
