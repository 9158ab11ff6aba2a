package segments

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

type handler struct{ svc *Service }

// Register mounts the segment endpoints on g (the /v1 group), with a
// customer's segments.
func Register(g *echo.Group, svc *Service) {
	h := handler{svc: svc}
	g.POST("/segments", httpx.Create(svc.Create))
	g.GET("/segments", h.list)
	g.GET("/segments/:segmentId", httpx.Read("segmentId", svc.Get))
	g.DELETE("/segments/:segmentId", httpx.Delete("segmentId", svc.Delete))
	g.GET("/customers/:customerId/segments", h.ofCustomer)
}

// listFields are the list's filters (VDOCS' GET /v1/segments).
var listFields = map[string]filters.Field{"id": {Kind: filters.String, Column: "id"}, "name": {Kind: filters.String, Column: "name"},
	"type": {Kind: filters.String, Column: "type"}, "created_at": {Kind: filters.DateTime, Column: "created_at"}}

var listSpec = listq.Spec{Orders: []string{"-created_at", "created_at", "name", "-name"}, Pages: true}

func (h handler) list(c echo.Context) error {
	return httpx.WithList(c, listSpec, func(q listq.Query) (any, error) {
		qs := c.QueryParams()
		f, err := filters.Parse(qs, listFields)
		if err != nil {
			return nil, err
		}
		lq := listQuery{Query: q, IDs: append(qs["ids"], qs["ids[]"]...)}
		if !f.Empty() {
			var args []any
			lq.Where, args = f.SQL(listFields, []any{httpx.ProjectID(c)}, time.Now())
			lq.Args = args[1:]
		}
		vs, total, more, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), lq)
		next := ""
		if more && len(vs) > 0 {
			next = vs[len(vs)-1].ID
		}
		return listq.List[View]{Data: vs, Total: &total, More: more, Next: next}, err
	})
}

// segmentList is GET /v1/customers/{id}/segments: unpaged.
type segmentList struct {
	Object  string   `json:"object"`
	DataRef string   `json:"data_ref"`
	Data    []Simple `json:"data"`
	Total   int      `json:"total"`
}

func (h handler) ofCustomer(c echo.Context) error {
	segs, err := h.svc.OfCustomer(c.Request().Context(), httpx.ProjectID(c), c.Param("customerId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, segmentList{Object: "list", DataRef: "data", Data: segs, Total: len(segs)})
}
