package products

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/listq"
)

// Handler serves the product, SKU and product job endpoints.
type Handler struct{ svc *Service }

// Register mounts the endpoints on g (the /v1 group).
func Register(g *echo.Group, svc *Service) {
	h := Handler{svc}
	g.POST("/products", httpx.Create(h.svc.CreateProduct))
	g.GET("/products", h.listProducts)
	g.GET("/products/:productId", httpx.Read("productId", h.svc.GetProduct))
	g.PUT("/products/:productId", httpx.Update("productId", h.svc.UpdateProduct))
	g.DELETE("/products/:productId", h.deleteProduct)
	g.POST("/products/:productId/skus", h.createSKU)
	g.GET("/products/:productId/skus", h.listSKUs)
	g.PUT("/products/:productId/skus/:skuId", h.updateSKU)
	g.DELETE("/products/:productId/skus/:skuId", h.deleteSKU)
	g.GET("/skus/:skuId", httpx.Read("skuId", h.svc.GetSKU))
	g.POST("/products/bulk/async", h.bulkUpdate)
	g.POST("/products/metadata/async", h.metadataUpdate)
	g.POST("/products/importCSV", h.importCSV(JobImportProducts))
	g.POST("/skus/importCSV", h.importCSV(JobImportSKUs))
}

// force reads the `force` query parameter: absent, true or false.
func force(q url.Values) (bool, error) {
	if _, ok := q["force"]; !ok {
		return false, nil
	}
	switch v := q.Get("force"); v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, apierr.InvalidQuery("force", "must be true (remove permanently) or false (move to the bin), got "+strconv.Quote(v))
	}
}

func (h Handler) deleteProduct(c echo.Context) error {
	f, err := force(c.QueryParams())
	if err != nil {
		return err
	}
	if err := h.svc.DeleteProduct(c.Request().Context(), httpx.ProjectID(c), c.Param("productId"), f); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h Handler) listProducts(c echo.Context) error {
	spec := listq.Spec{Orders: []string{"created_at", "-created_at", "updated_at", "-updated_at"}, Pages: true}
	return httpx.WithList(c, spec, func(lq listq.Query) (any, error) {
		if err := listq.Unserved(c.QueryParams(), "start_date", "end_date"); err != nil {
			return nil, err
		}
		rows, total, err := h.svc.ListProducts(c.Request().Context(), httpx.ProjectID(c), lq)
		if err != nil {
			return nil, err
		}
		page, more, next := listq.Page(rows, lq.Limit, func(v View) string { return v.ID })
		return listq.List[View]{DataRef: "products", Data: page, Total: &total, More: more, Next: next}, nil
	})
}

func (h Handler) createSKU(c echo.Context) error {
	return httpx.WithBody(c, func(p Patch) (any, error) {
		return h.svc.CreateSKU(c.Request().Context(), httpx.ProjectID(c), c.Param("productId"), p)
	})
}

func (h Handler) updateSKU(c echo.Context) error {
	return httpx.WithBody(c, func(p Patch) (any, error) {
		return h.svc.UpdateSKU(c.Request().Context(), skuRefOf(c), p)
	})
}

func (h Handler) deleteSKU(c echo.Context) error {
	f, err := force(c.QueryParams())
	if err != nil {
		return err
	}
	if err := h.svc.DeleteSKU(c.Request().Context(), skuRefOf(c), f); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// listSKUs answers every SKU of the product as the reference does, a page
// of at most 100 at a time: `limit` (default 100), `page`, `order` (by
// creation or update) and `starting_after_id`.
func (h Handler) listSKUs(c echo.Context) error {
	spec := listq.Spec{DefaultLimit: 100, Orders: []string{"created_at", "-created_at", "updated_at", "-updated_at"}, Pages: true}
	return httpx.WithList(c, spec, func(lq listq.Query) (any, error) {
		if err := listq.Unserved(c.QueryParams(), "start_date", "end_date"); err != nil {
			return nil, err
		}
		rows, total, err := h.svc.ListSKUs(c.Request().Context(), httpx.ProjectID(c), c.Param("productId"), lq)
		if err != nil {
			return nil, err
		}
		page, more, next := listq.PageOf(rows, lq.Limit, func(s SKU) string { return s.ID }, SKU.View)
		return listq.List[SKUView]{DataRef: "skus", Data: page, Total: &total, More: more, Next: next}, nil
	})
}

// skuRefOf is the SKU a request's path names: /products/{productId}/skus/{skuId}.
func skuRefOf(c echo.Context) SKURef {
	return SKURef{Project: httpx.ProjectID(c), Product: c.Param("productId"), SKU: c.Param("skuId")}
}
