package tiers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/campaigns"
)

// Program is what tiers ask of the loyalty program they shape
// (regional/loyalty), which reads the tiers with its cards.
type Program interface {
	// CampaignID is the id of the live campaign idOrName names, or its 404.
	CampaignID(ctx context.Context, q db.Querier, projectID, idOrName string) (string, error)
	// CardBalance is the campaign and balance of the card memberID names, or its 404.
	CardBalance(ctx context.Context, q db.Querier, projectID, memberID string) (campaignID string, balance int64, err error)
}

// Terms are the ids of a campaign's earning rules, or of the rewards
// assigned to it: the only ones a tier of the campaign may map.
type Terms func(ctx context.Context, q db.Querier, projectID, campaignID string) (map[string]bool, error)

// Service keeps the tiers of loyalty campaigns.
type Service struct {
	pool           *db.Pool
	clock          *clock.Clock
	prog           Program
	rules, rewards Terms
	meta           MetadataSchemas
}

// MetadataSchemas checks the metadata a write leaves against the
// project's schema for its resource (metaschemas.Checker): 400
// metadata_validation_failed naming every failing key.
type MetadataSchemas interface {
	CheckMetadata(ctx context.Context, projectID, resource string, md map[string]any) error
}

// NewService returns the tiers of prog's campaigns, whose mappings may
// name the rules and rewards the Terms give.
func NewService(pool *db.Pool, clk *clock.Clock, prog Program, rules, rewards Terms, meta MetadataSchemas) *Service {
	return &Service{pool: pool, clock: clk, prog: prog, rules: rules, rewards: rewards, meta: meta}
}

// Now is the service's time: the platform clock, which tests move.
func (s *Service) Now() time.Time { return s.clock.Now() }

// TierRequest is one tier of POST /v1/loyalties/{campaignId}/tiers.
type TierRequest struct {
	Name         *string            `json:"name"`
	EarningRules map[string]Mapping `json:"earning_rules"`
	Rewards      map[string]Mapping `json:"rewards"`
	Points       *struct {
		From *int64 `json:"from"`
		To   *int64 `json:"to"`
	} `json:"points"`
	Metadata map[string]any `json:"metadata"`
}

// maxTiers bounds a campaign's tiers: every balance change reads them all.
const maxTiers = 100

// CreateTiers adds tiers to a campaign: their ranges may not overlap each
// other's or those of the campaign's tiers.
func (s *Service) CreateTiers(ctx context.Context, projectID, campaignID string, rs []TierRequest) ([]TierView, error) {
	if len(rs) == 0 || len(rs) > 100 {
		return nil, apierr.InvalidPayload("the body is a list of 1 to 100 tiers: [{\"name\": …, \"points\": {\"from\": …, \"to\": …}}]")
	}
	var out []TierView
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		campID, err := s.prog.CampaignID(ctx, tx, projectID, campaignID)
		if err != nil {
			return err
		}
		tiers, err := tiersOf(ctx, tx, projectID, campID)
		if err != nil {
			return err
		}
		ruleIDs, err := s.rules(ctx, tx, projectID, campID)
		if err != nil {
			return err
		}
		rewardIDs, err := s.rewards(ctx, tx, projectID, campID)
		if err != nil {
			return err
		}
		if len(tiers)+len(rs) > maxTiers {
			return apierr.InvalidPayload(fmt.Sprintf("a campaign has at most %d tiers; it has %d", maxTiers, len(tiers)))
		}
		now := s.Now()
		b := &pgx.Batch{}
		for i, r := range rs {
			at := fmt.Sprintf("[%d]", i)
			if r.Name == nil || strings.TrimSpace(*r.Name) == "" || utf8.RuneCountInString(*r.Name) > 200 {
				return apierr.InvalidPayload(at + ".name is required: 1 to 200 characters")
			}
			if r.Points == nil || r.Points.From == nil || *r.Points.From < 0 {
				return apierr.InvalidPayload(at + ".points.from is required: the lowest balance in the tier, 0 or more")
			}
			if to := r.Points.To; to != nil && *to < *r.Points.From {
				return apierr.InvalidPayload(at + ".points.to must be at least points.from, or absent for no upper bound")
			}
			for id, m := range r.EarningRules {
				if !ruleIDs[id] {
					return apierr.InvalidPayload(fmt.Sprintf("%s.earning_rules: %s is not an earning rule of the campaign", at, id))
				}
				if err := m.check(fmt.Sprintf("%s.earning_rules.%s", at, id)); err != nil {
					return err
				}
			}
			for id, m := range r.Rewards {
				if !rewardIDs[id] {
					return apierr.InvalidPayload(fmt.Sprintf("%s.rewards: %s is not a reward assigned to the campaign", at, id))
				}
				if err := m.check(fmt.Sprintf("%s.rewards.%s", at, id)); err != nil {
					return err
				}
			}
			t := Tier{ID: ids.New("ltr_"), CampaignID: campID, Name: *r.Name, From: *r.Points.From, To: r.Points.To,
				Attrs: TierAttrs{EarningRules: r.EarningRules, Rewards: r.Rewards, Metadata: r.Metadata}, CreatedAt: now}
			if err := s.meta.CheckMetadata(ctx, projectID, "loyalty_tier", t.Attrs.Metadata); err != nil {
				return err
			}
			for _, o := range tiers {
				if overlap(o, t) {
					return apierr.InvalidPayload(fmt.Sprintf("%s.points overlaps the range of tier %s (%s)", at, o.Name, rangeText(o)))
				}
			}
			tiers = append(tiers, t)
			attrs, err := json.Marshal(t.Attrs)
			if err != nil {
				return err
			}
			b.Queue(`INSERT INTO loyalty_tiers (project_id, `+tierColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL)`,
				projectID, t.ID, t.CampaignID, t.Name, t.From, t.To, attrs, t.CreatedAt)
			out = append(out, t.View())
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return out, err
}

func overlap(a, b Tier) bool {
	aboveA := a.To != nil && b.From > *a.To
	belowA := b.To != nil && *b.To < a.From
	return !aboveA && !belowA
}

func rangeText(t Tier) string {
	if t.To == nil {
		return fmt.Sprintf("%d and up", t.From)
	}
	return fmt.Sprintf("%d to %d", t.From, *t.To)
}

// ListTiers returns a campaign's tiers.
func (s *Service) ListTiers(ctx context.Context, projectID, campaignID string, lq listq.Query) ([]TierView, int, error) {
	order := lq.Order
	campID, err := s.prog.CampaignID(ctx, s.pool, projectID, campaignID)
	if err != nil {
		return nil, 0, err
	}
	tiers, err := tiersOf(ctx, s.pool, projectID, campID)
	if err != nil {
		return nil, 0, err
	}
	key := func(t Tier) time.Time { return t.CreatedAt }
	if strings.HasSuffix(order, "updated_at") {
		key = func(t Tier) time.Time {
			if t.UpdatedAt != nil {
				return *t.UpdatedAt
			}
			return t.CreatedAt
		}
	}
	if order != "" {
		desc := strings.HasPrefix(order, "-")
		sort.SliceStable(tiers, func(i, j int) bool {
			if desc {
				return key(tiers[j]).Before(key(tiers[i]))
			}
			return key(tiers[i]).Before(key(tiers[j]))
		})
	}
	// A program's tiers are read whole (it has few), so the page is cut
	// from them.
	page, _ := listq.Window(tiers, lq)
	out := make([]TierView, 0, len(page))
	for _, t := range page {
		out = append(out, t.View())
	}
	return out, len(tiers), nil
}

// GetTier returns the tier ref names.
func (s *Service) GetTier(ctx context.Context, ref campaigns.ItemRef) (TierView, error) {
	campID, err := s.prog.CampaignID(ctx, s.pool, ref.Project, ref.Campaign)
	if err != nil {
		return TierView{}, err
	}
	t, err := scanTier(s.pool.QueryRow(ctx, `SELECT `+tierColumns+` FROM loyalty_tiers WHERE project_id = $1 AND id = $2
		AND campaign_id = $3`, ref.Project, ref.ID, campID))
	if errors.Is(err, db.ErrNotFound) {
		return TierView{}, apierr.NotFound("loyalty_tier", ref.ID)
	}
	return t.View(), err
}

// MemberTiers returns the tier the card's balance puts its holder in: a
// list of one, or none.
func (s *Service) MemberTiers(ctx context.Context, projectID, memberID string) ([]TierView, error) {
	campID, balance, err := s.prog.CardBalance(ctx, s.pool, projectID, memberID)
	if err != nil {
		return nil, err
	}
	tiers, err := tiersOf(ctx, s.pool, projectID, campID)
	if err != nil {
		return nil, err
	}
	if t := Of(tiers, balance); t != nil {
		return []TierView{t.View()}, nil
	}
	return []TierView{}, nil
}

// handler serves the tier endpoints.
type handler struct{ svc *Service }

// Register mounts the tier endpoints on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/loyalties/:campaignId/tiers", h.createTiers)
	g.GET("/loyalties/:campaignId/tiers", h.listTiers)
	g.GET("/loyalties/:campaignId/tiers/:tierId", h.getTier)
	g.GET("/loyalties/members/:memberId/tiers", h.memberTiers)
}

func (h handler) createTiers(c echo.Context) error {
	return httpx.WithBody(c, func(rs []TierRequest) (any, error) {
		return h.svc.CreateTiers(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), rs)
	})
}

func (h handler) listTiers(c echo.Context) error {
	spec := listq.Spec{Orders: []string{"created_at", "-created_at", "updated_at", "-updated_at"}, NaturalOrder: true, Pages: true, NoCursor: true}
	return httpx.WithList(c, spec, func(lq listq.Query) (any, error) {
		vs, total, err := h.svc.ListTiers(c.Request().Context(), httpx.ProjectID(c), c.Param("campaignId"), lq)
		// Numbered pages only (no cursor): more follow this page's rows.
		return listq.List[TierView]{Data: vs, Total: &total, More: total > lq.Offset()+len(vs)}, err
	})
}

func (h handler) getTier(c echo.Context) error {
	return httpx.Reply(c)(h.svc.GetTier(c.Request().Context(), campaigns.ItemRefOf(c, "tierId")))
}

func (h handler) memberTiers(c echo.Context) error {
	vs, err := h.svc.MemberTiers(c.Request().Context(), httpx.ProjectID(c), c.Param("memberId"))
	if err != nil {
		return err
	}
	n := len(vs)
	return c.JSON(http.StatusOK, listq.List[TierView]{Data: vs, Total: &n})
}
