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
	"github.com/tallyhq/tally/regional/customers"
	"github.com/tallyhq/tally/regional/vouchers"
)

var tracer = otel.Tracer("github.com/tallyhq/tally/regional/publications")

// Events records webhook events in the caller's transaction.
type Events interface {
	Emit(ctx context.Context, tx db.Querier, projectID, eventType, entityID string, object any) error
}

// Service holds the rules of publications.
type Service struct {
	pool      *db.Pool
	events    Events
	customers *customers.Service
	vouchers  *vouchers.Service
	clock     *clock.Clock
}

// NewService returns the publication service.
func NewService(pool *db.Pool, events Events, cust *customers.Service, vs *vouchers.Service, clk *clock.Clock) *Service {
	return &Service{pool: pool, events: events, customers: cust, vouchers: vs, clock: clk}
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
	JoinOnce bool            `json:"-"` // the join_once query parameter
}

// parsed is a checked request.
type parsed struct {
	campaign string
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
			if c.Count != nil && *c.Count != 1 {
				return p, apierr.InvalidPayload("campaign.count: one voucher per publication is served; publish again for more")
			}
			p.campaign = *c.Name
		}
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
		c, err := s.vouchers.CampaignIn(ctx, tx, projectID, p.campaign)
		if err != nil {
			return View{}, nil, err
		}
		camp = &c
		pub.CampaignID, pub.CampaignName, pub.IsReferralCode = &c.ID, &c.Name, c.Attrs.Voucher.IsReferralCode
		if c.Attrs.JoinOnce || r.JoinOnce {
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
		v, err = s.vouchers.ClaimFree(ctx, tx, projectID, c, cust.ID)
		if errors.Is(err, vouchers.ErrNoFreeVoucher) {
			return s.fail(ctx, tx, projectID, pub, cust, c)
		}
	} else {
		v, err = s.vouchers.ClaimCode(ctx, tx, projectID, *r.Voucher, cust.ID)
		pub.CampaignID, pub.CampaignName = v.CampaignID, v.CampaignName
	}
	if err != nil {
		return View{}, nil, err
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
		event["campaign"] = simpleCampaign(*camp)
	}
	if err := s.events.Emit(ctx, tx, projectID, EventSucceeded, pub.ID, view); err != nil {
		return View{}, nil, err
	}
	if err := s.events.Emit(ctx, tx, projectID, vouchers.EventVoucherPublished, v.ID, event); err != nil {
		return View{}, nil, err
	}
	return view, nil, s.events.Emit(ctx, tx, projectID, EventCustomerSucceeded, cust.ID, event)
}

// fail records a refused publication and its events; the transaction
// commits (the customer upserted stays), and the request answers 400.
func (s *Service) fail(ctx context.Context, tx pgx.Tx, projectID string, pub Publication, cust customers.Customer, c vouchers.Campaign) (View, error, error) {
	code, msg := "no_voucher_suitable_for_publication", fmt.Sprintf("Campaign %s has no free voucher left and is STATIC.", c.Name)
	pub.Result, pub.FailureCode, pub.FailureMessage, pub.JoinOnce = Failure, &code, &msg, nil
	// A retried source_id may succeed later: a failure does not take it.
	pub.SourceID = nil
	if err := insert(ctx, tx, projectID, pub); err != nil {
		return View{}, nil, err
	}
	view := pub.view(&cust)
	if err := s.events.Emit(ctx, tx, projectID, EventFailed, pub.ID, view); err != nil {
		return View{}, nil, err
	}
	if err := s.events.Emit(ctx, tx, projectID, EventCustomerFailed, cust.ID,
		map[string]any{"customer": cust.Simple(), "campaign": simpleCampaign(c), "publication": view}); err != nil {
		return View{}, nil, err
	}
	return View{}, apierr.New(http.StatusBadRequest, code, "Couldn't find any voucher suitable for publication", msg), nil
}

// again answers an earlier publication (join_once, or its source_id).
func (s *Service) again(ctx context.Context, tx pgx.Tx, projectID string, prev Publication, cust customers.Customer) (View, error, error) {
	if prev.Result != Success || prev.VoucherID == nil {
		return prev.view(&cust), nil, nil
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
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM publications WHERE project_id = $1 AND voucher_code = $2 AND result = 'SUCCESS'`,
		projectID, v.Code).Scan(&vv.Publish.Count); err != nil {
		return View{}, err
	}
	vv.IsReferralCode = pub.IsReferralCode
	view.Voucher = vv
	return view, nil
}

func simpleCampaign(c vouchers.Campaign) map[string]any {
	return map[string]any{"id": c.ID, "name": c.Name, "campaign_type": c.CampaignType, "type": c.Attrs.Type,
		"is_referral_code": c.Attrs.Voucher.IsReferralCode, "object": "campaign"}
}
