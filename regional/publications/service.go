package publications

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/telemetry"
	"github.com/tallyhq/tally/regional/campaigns"
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/loyalty"
	"github.com/tallyhq/tally/regional/vouchers"
	"github.com/tallyhq/tally/regional/webhooks"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/publications")

// Notifier raises webhook notices in the caller's transaction.
type Notifier interface {
	Emit(ctx context.Context, tx db.Querier, n webhooks.Notice) error
}

// Service holds the rules of publications.
type Service struct {
	pool      *db.Pool
	notify    Notifier
	customers *customers.Service
	vouchers  *vouchers.Service
	loyalty   *loyalty.Service
	meta      MetadataSchemas
	clock     *clock.Clock
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
}

// NewService returns the publication service. Vouchers of discount, gift
// and referral campaigns are given through vs; a loyalty program's card
// through loy, as its members join (loyalty.Service.JoinIn).
func NewService(pool *db.Pool, notify Notifier, cust *customers.Service, vs *vouchers.Service, loy *loyalty.Service,
	meta MetadataSchemas, clk *clock.Clock) *Service {
	return &Service{pool: pool, notify: notify, customers: cust, vouchers: vs, loyalty: loy, meta: meta, clock: clk}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// Request is a publication request: the body of POST /v1/publications, or
// the query of GET /v1/publications/create made into one.
type Request struct {
	Voucher  *string         `json:"voucher"`
	Campaign json.RawMessage `json:"campaign"` // a name or id, or {name, count}
	SourceID *string         `json:"source_id"`
	Customer json.RawMessage `json:"customer"`
	Metadata json.RawMessage `json:"metadata"`
	Channel  *string         `json:"channel"`
	// ExpirationDate (Tally's) makes the vouchers given expire then, or
	// earlier if they already do: it never lengthens a voucher's life.
	ExpirationDate *time.Time `json:"expiration_date"`
	JoinOnce       bool       `json:"-"` // the join_once query parameter
}

// maxCount is the most vouchers one publication gives (the reference's
// campaign.count maximum).
const maxCount = 50

// parsed is a checked request.
type parsed struct {
	campaign string
	count    int // vouchers of the campaign to give: 1 to maxCount
	custRef  string
	patch    *customers.Patch
	metadata map[string]any
	channel  string
}

func (r Request) check() (parsed, error) {
	var p parsed
	if len(r.Customer) == 0 || string(r.Customer) == "null" {
		return p, apierr.InvalidPayload("customer is required: an object with id or source_id (and the customer's data), or a customer id")
	}
	if err := json.Unmarshal(r.Customer, &p.custRef); err != nil {
		p.patch = &customers.Patch{}
		if err := json.Unmarshal(r.Customer, p.patch); err != nil {
			return p, apierr.InvalidPayload("customer must be a customer object or a customer id: " + err.Error())
		}
	} else if strings.TrimSpace(p.custRef) == "" {
		return p, apierr.InvalidPayload("customer must not be empty")
	}
	if len(r.Campaign) > 0 && string(r.Campaign) != "null" {
		if err := json.Unmarshal(r.Campaign, &p.campaign); err != nil {
			var c struct {
				Name  *string `json:"name"`
				Count *int    `json:"count"`
			}
			if err := json.Unmarshal(r.Campaign, &c); err != nil || c.Name == nil {
				return p, apierr.InvalidPayload("campaign must be a campaign name or id, or an object with name (and count)")
			}
			if c.Count != nil {
				if *c.Count < 1 || *c.Count > maxCount {
					return p, apierr.InvalidPayload(fmt.Sprintf("campaign.count must be from 1 to %d", maxCount))
				}
				p.count = *c.Count
			}
			p.campaign = *c.Name
		}
	}
	if p.count == 0 {
		p.count = 1
	}
	if p.count > 1 && r.SourceID != nil && *r.SourceID != "" {
		// The reference's rule: a source_id names one publication of one voucher.
		return p, apierr.InvalidPayload("source_id publishes one voucher per request: leave it out, or send campaign.count 1")
	}
	switch {
	case p.campaign == "" && (r.Voucher == nil || *r.Voucher == ""):
		return p, apierr.InvalidPayload("campaign or voucher is required: the campaign whose voucher to publish, or the voucher's code")
	case p.campaign != "" && r.Voucher != nil && *r.Voucher != "":
		return p, apierr.InvalidPayload("campaign and voucher exclude each other: name the campaign or the voucher")
	}
	if len(r.Metadata) > 0 && string(r.Metadata) != "null" {
		if r.Metadata[0] != '{' || json.Unmarshal(r.Metadata, &p.metadata) != nil {
			return p, apierr.InvalidPayload("metadata must be an object")
		}
	}
	p.channel = "API"
	if r.Channel != nil && *r.Channel != "" {
		if len(*r.Channel) > 200 {
			return p, apierr.InvalidPayload("channel is at most 200 characters")
		}
		p.channel = *r.Channel
	}
	if r.SourceID != nil && len(*r.SourceID) > 200 {
		return p, apierr.InvalidPayload("source_id is at most 200 characters")
	}
	return p, nil
}

// Create publishes a voucher to a customer: the named voucher, or a free
// voucher of the named campaign. A join_once campaign (or a request with
// join_once) gives a customer who already has a publication of it that
// publication again; a source_id already used gives its publication again.
// A campaign without a free voucher records a FAILURE publication and
// answers 400 no_voucher_suitable_for_publication.
//
// It runs at READ COMMITTED: the voucher is locked before it is changed
// (FOR UPDATE SKIP LOCKED), and the once-only rules are unique indexes
// (source_id; customer and join_once campaign), whose conflict runs the
// request again to find the winner's publication.
func (s *Service) Create(ctx context.Context, projectID string, r Request) (_ View, err error) {
	ctx, span := tracer.Start(ctx, "publications.Create")
	defer telemetry.End(span, &err)
	p, err := r.check()
	if err != nil {
		return View{}, err
	}
	if err := s.meta.CheckMetadata(ctx, projectID, "publication", p.metadata); err != nil {
		return View{}, err
	}
	var out View
	var refused error
	attempt := func() error {
		refused = nil
		return db.InTxReadCommitted(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			out, refused, err = s.create(ctx, tx, projectID, r, p)
			return err
		})
	}
	err = attempt()
	if errors.Is(err, db.ErrConflict) {
		err = attempt() // another request made the once-only publication first: this run finds it
	}
	if err != nil {
		return View{}, err
	}
	if refused != nil {
		return View{}, refused
	}
	return out, nil
}

func (s *Service) create(ctx context.Context, tx pgx.Tx, projectID string, r Request, p parsed) (View, error, error) {
	var cust customers.Customer
	var err error
	if p.patch != nil {
		cust, _, err = s.customers.UpsertIn(ctx, tx, projectID, p.patch)
	} else {
		cust, err = s.customers.GetIn(ctx, tx, projectID, p.custRef)
	}
	if err != nil {
		return View{}, nil, err
	}
	if r.SourceID != nil && *r.SourceID != "" {
		prev, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM publications WHERE project_id = $1 AND source_id = $2`,
			projectID, *r.SourceID))
		if err == nil {
			return s.again(ctx, tx, projectID, prev, cust)
		}
		if !errors.Is(err, db.ErrNotFound) {
			return View{}, nil, err
		}
	}
	pub := Publication{ID: ids.New("pub_"), CustomerID: cust.ID, TrackingID: cust.SourceID, Channel: p.channel,
		SourceID: r.SourceID, Result: Success, Metadata: p.metadata, CreatedAt: s.now()}
	var v vouchers.Voucher
	var camp *vouchers.Campaign
	if p.campaign != "" {
		id, typ, err := campaigns.TypeOf(ctx, tx, projectID, p.campaign)
		if errors.Is(err, db.ErrNotFound) {
			return View{}, nil, apierr.NotFound("campaign", p.campaign)
		}
		if err != nil {
			return View{}, nil, err
		}
		if typ == "LOYALTY_PROGRAM" {
			return s.createCard(ctx, tx, projectID, id, r, p, pub, cust)
		}
		c, err := s.vouchers.CampaignIn(ctx, tx, projectID, id)
		if err != nil {
			return View{}, nil, err
		}
		camp = &c
		pub.CampaignID, pub.CampaignName, pub.IsReferralCode = &c.ID, &c.Name, c.Attrs.Voucher.IsReferralCode
		if c.Attrs.JoinOnce || r.JoinOnce {
			if p.count > 1 {
				return View{}, nil, apierr.InvalidPayload(fmt.Sprintf(
					"campaign.count: campaign %s is join_once (or join_once=true was sent): a customer holds one code of it, so count must be 1", c.Name))
			}
			pub.JoinOnce = &c.ID
			prev, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM publications
				WHERE project_id = $1 AND customer_id = $2 AND join_once_campaign = $3`, projectID, cust.ID, c.ID))
			if err == nil {
				return s.again(ctx, tx, projectID, prev, cust)
			}
			if !errors.Is(err, db.ErrNotFound) {
				return View{}, nil, err
			}
		}
		if err := s.checkExpiration(r); err != nil {
			return View{}, nil, err
		}
		if p.count > 1 {
			return s.createMany(ctx, tx, projectID, c, p.count, r.ExpirationDate, pub, cust)
		}
		v, err = s.vouchers.ClaimFree(ctx, tx, projectID, c, cust.ID)
		if errors.Is(err, vouchers.ErrNoFreeVoucher) {
			return s.fail(ctx, tx, projectID, pub, cust, simpleCampaign(c.ID, c.Name, c.CampaignType, c.Attrs.Type, c.Attrs.Voucher.IsReferralCode),
				fmt.Sprintf("Campaign %s has no free voucher left and is STATIC.", c.Name))
		}
	} else {
		if err := s.checkExpiration(r); err != nil {
			return View{}, nil, err
		}
		var held bool
		v, held, err = s.vouchers.ClaimCode(ctx, tx, projectID, *r.Voucher, cust.ID)
		pub.CampaignID, pub.CampaignName, pub.IsReferralCode = v.CampaignID, v.CampaignName, v.Referral
		if err == nil && held && r.ExpirationDate != nil {
			// Publishing again a voucher the customer holds gives nothing:
			// its life is not this publication's to shorten.
			return View{}, nil, apierr.InvalidPayload(fmt.Sprintf("expiration_date: voucher %s is already %s's; "+
				"expiration_date sets when the vouchers a publication gives expire", v.Code, cust.ID))
		}
	}
	if err != nil {
		return View{}, nil, err
	}
	if r.ExpirationDate != nil {
		if err := s.vouchers.ExpireBy(ctx, tx, projectID, &v, *r.ExpirationDate); err != nil {
			return View{}, nil, err
		}
	}
	pub.VoucherID, pub.VoucherCode, pub.VoucherType = &v.ID, &v.Code, &v.Type
	if err := insert(ctx, tx, projectID, pub); err != nil {
		return View{}, nil, err
	}
	view, err := s.full(ctx, tx, projectID, pub, v, cust)
	if err != nil {
		return View{}, nil, err
	}
	event := map[string]any{"customer": cust.Simple(), "publication": view, "voucher": view.Voucher}
	if camp != nil {
		event["campaign"] = simpleCampaign(camp.ID, camp.Name, camp.CampaignType, camp.Attrs.Type, camp.Attrs.Voucher.IsReferralCode)
	}
	if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventSucceeded, Entity: pub.ID, Object: view}); err != nil {
		return View{}, nil, err
	}
	if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: vouchers.EventVoucherPublished, Entity: v.ID,
		Object: event}); err != nil {
		return View{}, nil, err
	}
	return view, nil, s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventCustomerSucceeded, Entity: cust.ID,
		Object: event})
}

// PublishIn publishes a voucher of at.Campaign (a card, for a loyalty
// program) to at.Customer in tx as POST /v1/publications does, for a
// CAMPAIGN reward a member buys with points (regional/redemptions): a
// refused publication is the error, which rolls the redemption back with
// it. fresh is false when the publication is an earlier one answered again
// (a join_once campaign the customer joined before).
func (s *Service) PublishIn(ctx context.Context, tx pgx.Tx, at campaigns.HolderRef) (v View, fresh bool, err error) {
	cust, _ := json.Marshal(at.Customer)
	camp, _ := json.Marshal(at.Campaign)
	r := Request{Customer: cust, Campaign: camp}
	p, err := r.check()
	if err != nil {
		return View{}, false, err
	}
	v, refused, err := s.create(ctx, tx, at.Project, r, p)
	if err == nil {
		err = refused
	}
	return v, err == nil && !v.again, err
}

// checkExpiration refuses an expiration_date that is not in the future.
func (s *Service) checkExpiration(r Request) error {
	if r.ExpirationDate != nil && !r.ExpirationDate.After(s.now()) {
		return apierr.InvalidPayload("expiration_date must be in the future: the vouchers given expire then")
	}
	return nil
}

// createMany gives cust n free vouchers of c (campaign.count above 1) in
// one publication, all or none: a campaign without n free vouchers (and
// STATIC) records a FAILURE publication, as one without one does, and
// gives nothing. The publication names its vouchers in
// publication_vouchers and answers their codes and ids (vouchers,
// vouchers_id), as the reference's publication of several does;
// voucher.published is raised for each.
func (s *Service) createMany(ctx context.Context, tx pgx.Tx, projectID string, c vouchers.Campaign, n int, at *time.Time,
	pub Publication, cust customers.Customer) (View, error, error) {
	simple := simpleCampaign(c.ID, c.Name, c.CampaignType, c.Attrs.Type, c.Attrs.Voucher.IsReferralCode)
	vs, err := s.vouchers.ClaimFreeN(ctx, tx, projectID, c, cust.ID, n)
	if errors.Is(err, vouchers.ErrNoFreeVoucher) {
		return s.fail(ctx, tx, projectID, pub, cust, simple,
			fmt.Sprintf("Campaign %s has fewer than the %d free vouchers asked for and is STATIC: none was published.", c.Name, n))
	}
	if err != nil {
		return View{}, nil, err
	}
	if at != nil {
		for i := range vs {
			if err := s.vouchers.ExpireBy(ctx, tx, projectID, &vs[i], *at); err != nil {
				return View{}, nil, err
			}
		}
	}
	pub.VoucherType = &c.Attrs.Voucher.Type
	if err := insert(ctx, tx, projectID, pub); err != nil {
		return View{}, nil, err
	}
	b := &pgx.Batch{}
	gv := make([]given, len(vs))
	for i, v := range vs {
		gv[i] = given{ID: v.ID, Code: v.Code}
		b.Queue(`INSERT INTO publication_vouchers (project_id, publication_id, position, voucher_id, voucher_code) VALUES ($1, $2, $3, $4, $5)`,
			projectID, pub.ID, i, v.ID, v.Code)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return View{}, nil, err
	}
	view := pub.view(&cust)
	view.several(gv)
	ids, codes := make([]string, len(vs)), make([]string, len(vs))
	for i, v := range vs {
		ids[i], codes[i] = v.ID, v.Code
	}
	counts, err := PublishCounts(ctx, tx, projectID, ids, codes)
	if err != nil {
		return View{}, nil, err
	}
	if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventSucceeded, Entity: pub.ID, Object: view}); err != nil {
		return View{}, nil, err
	}
	for _, v := range vs {
		vv := v.View()
		vv.Publish.Count = counts[v.ID]
		if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: vouchers.EventVoucherPublished, Entity: v.ID,
			Object: map[string]any{"customer": cust.Simple(), "publication": view, "voucher": vv, "campaign": simple}}); err != nil {
			return View{}, nil, err
		}
	}
	return view, nil, s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventCustomerSucceeded, Entity: cust.ID,
		Object: map[string]any{"customer": cust.Simple(), "publication": view, "campaign": simple}})
}

// createCard gives cust a card of the loyalty program campaignID as its
// members join (loyalty.Service.JoinIn: the card they hold, a free one or,
// AUTO_UPDATE, a new one; it raises voucher.published for a card it
// gives). A program is joined once: its publication is join_once, and a
// count above 1 is refused.
func (s *Service) createCard(ctx context.Context, tx pgx.Tx, projectID, campaignID string, r Request, p parsed, pub Publication,
	cust customers.Customer) (View, error, error) {
	if p.count > 1 {
		return View{}, nil, apierr.InvalidPayload(fmt.Sprintf(
			"campaign.count: %s is a loyalty program, which a customer joins once with one card; count must be 1", p.campaign))
	}
	pub.JoinOnce = &campaignID
	prev, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM publications
		WHERE project_id = $1 AND customer_id = $2 AND join_once_campaign = $3`, projectID, cust.ID, campaignID))
	if err == nil {
		return s.again(ctx, tx, projectID, prev, cust)
	}
	if !errors.Is(err, db.ErrNotFound) {
		return View{}, nil, err
	}
	if r.ExpirationDate != nil {
		return View{}, nil, apierr.InvalidPayload("expiration_date: " + p.campaign +
			" is a loyalty program, whose cards expire as the program says; expiration_date is for discount, gift and referral vouchers")
	}
	card, camp, err := s.loyalty.JoinIn(ctx, tx, campaigns.HolderRef{Project: projectID, Campaign: campaignID, Customer: cust.ID})
	simple := func(c loyalty.Campaign) map[string]any {
		return simpleCampaign(c.ID, c.Name, c.CampaignType, c.Attrs.Type, false)
	}
	if ae := (*apierr.Error)(nil); errors.As(err, &ae) && ae.Key == "no_voucher_suitable_for_publication" {
		c, cerr := s.loyalty.Campaign(ctx, tx, projectID, campaignID)
		if cerr != nil {
			return View{}, nil, cerr
		}
		pub.CampaignID, pub.CampaignName = &c.ID, &c.Name
		return s.fail(ctx, tx, projectID, pub, cust, simple(c), ae.Details)
	}
	if err != nil {
		return View{}, nil, err
	}
	typ := "LOYALTY_CARD"
	pub.CampaignID, pub.CampaignName = &camp.ID, &camp.Name
	pub.VoucherID, pub.VoucherCode, pub.VoucherType = &card.ID, &card.Code, &typ
	if err := insert(ctx, tx, projectID, pub); err != nil {
		return View{}, nil, err
	}
	view := pub.view(&cust)
	view.Voucher = card.View(camp)
	if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventSucceeded, Entity: pub.ID, Object: view}); err != nil {
		return View{}, nil, err
	}
	return view, nil, s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventCustomerSucceeded, Entity: cust.ID,
		Object: map[string]any{"customer": cust.Simple(), "publication": view, "voucher": view.Voucher, "campaign": simple(camp)}})
}

// fail records a refused publication and its notices; the transaction
// commits (the customer upserted stays), and the request answers 400.
func (s *Service) fail(ctx context.Context, tx pgx.Tx, projectID string, pub Publication, cust customers.Customer, campaign map[string]any,
	msg string) (View, error, error) {
	code := "no_voucher_suitable_for_publication"
	pub.Result, pub.FailureCode, pub.FailureMessage, pub.JoinOnce = Failure, &code, &msg, nil
	pub.VoucherID, pub.VoucherCode = nil, nil
	// A retried source_id may succeed later: a failure does not take it.
	pub.SourceID = nil
	if err := insert(ctx, tx, projectID, pub); err != nil {
		return View{}, nil, err
	}
	view := pub.view(&cust)
	if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventFailed, Entity: pub.ID, Object: view}); err != nil {
		return View{}, nil, err
	}
	if err := s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: EventCustomerFailed, Entity: cust.ID,
		Object: map[string]any{"customer": cust.Simple(), "campaign": campaign, "publication": view}}); err != nil {
		return View{}, nil, err
	}
	return View{}, apierr.New(http.StatusBadRequest, code, "Couldn't find any voucher suitable for publication", msg), nil
}

// again answers an earlier publication (join_once, or its source_id).
func (s *Service) again(ctx context.Context, tx pgx.Tx, projectID string, prev Publication, cust customers.Customer) (View, error, error) {
	v, refused, err := s.answerAgain(ctx, tx, projectID, prev, cust)
	v.again = true
	return v, refused, err
}

func (s *Service) answerAgain(ctx context.Context, tx pgx.Tx, projectID string, prev Publication, cust customers.Customer) (View, error, error) {
	if prev.Result != Success {
		return prev.view(&cust), nil, nil
	}
	if prev.VoucherID == nil { // a publication of several
		many, err := vouchersOf(ctx, tx, projectID, []string{prev.ID})
		if err != nil {
			return View{}, nil, err
		}
		view := prev.view(&cust)
		view.several(many[prev.ID])
		return view, nil, nil
	}
	if prev.VoucherType != nil && *prev.VoucherType == "LOYALTY_CARD" {
		view := prev.view(&cust)
		card, err := s.loyalty.MemberIn(ctx, tx, projectID, *prev.VoucherID)
		if err == nil {
			view.Voucher = card
		} else if ae := (*apierr.Error)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			return View{}, nil, err
		}
		return view, nil, nil
	}
	var v *vouchers.Voucher
	b := &pgx.Batch{}
	vouchers.QueueByIDs(b, projectID, []string{*prev.VoucherID}, func(x vouchers.Voucher) { v = &x })
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return View{}, nil, err
	}
	if v == nil {
		return prev.view(&cust), nil, nil
	}
	view, err := s.full(ctx, tx, projectID, prev, *v, cust)
	return view, nil, err
}

// full renders a successful publication with its whole voucher, whose
// publish.count counts its publications.
func (s *Service) full(ctx context.Context, tx pgx.Tx, projectID string, pub Publication, v vouchers.Voucher, cust customers.Customer) (View, error) {
	view := pub.view(&cust)
	vv := v.View()
	counts, err := PublishCounts(ctx, tx, projectID, []string{v.ID}, []string{v.Code})
	if err != nil {
		return View{}, err
	}
	vv.Publish.Count = counts[v.ID]
	view.Voucher = vv
	return view, nil
}

func simpleCampaign(id, name, campaignType, typ string, referral bool) map[string]any {
	return map[string]any{"id": id, "name": name, "campaign_type": campaignType, "type": typ,
		"is_referral_code": referral, "object": "campaign"}
}
