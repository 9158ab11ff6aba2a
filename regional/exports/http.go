package exports

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/dltoken"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/internal/identity"
	"github.com/tallyhq/tally/internal/listq"
	"github.com/tallyhq/tally/regional/loyalty"
)

type handler struct{ svc *Service }

// Register mounts the export endpoints on the /v1 group.
func Register(g *echo.Group, svc *Service) {
	h := handler{svc}
	g.POST("/loyalties/:campaignId/transactions/export", h.campaignTransactions)
	g.POST("/campaigns/:campaignId/transactions/export", h.anyCampaignTransactions)
	g.POST("/loyalties/members/:memberId/transactions/export", h.cardTransactions)
	g.POST("/loyalties/:campaignId/members/:memberId/transactions/export", h.cardTransactions)
	g.POST("/vouchers/:memberId/transactions/export", h.anyCardTransactions)
	g.POST("/loyalties/:campaignId/points-expiration/export", h.pointsExpiration)
	g.POST("/orders/export", h.orders)
	g.POST("/exports", h.create)
	g.GET("/exports", h.list)
	g.GET("/exports/:id", h.get)
	g.DELETE("/exports/:id", h.delete)
	// The file. The router sends GET /v1/exports/{id} here from the
	// download hosts, and from the API hosts when it carries a token or
	// asks for CSV; the identity of a token alone reaches nothing else.
	g.GET("/exports/:id/download", h.download)
	g.HEAD("/exports/:id/download", h.download)
}

// bind reads an export body, which may be empty.
func bind(c echo.Context) (Request, error) {
	var r Request
	if c.Request().ContentLength == 0 {
		return r, nil
	}
	body, err := io.ReadAll(c.Request().Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return r, echo.NewHTTPError(http.StatusRequestEntityTooLarge)
	}
	if err != nil {
		return r, apierr.InvalidPayload("The request body could not be read: " + err.Error() + ".")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return r, nil
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(body))
	return r, httpx.Bind(c, &r)
}

func (h handler) with(c echo.Context, fn func(ctx context.Context, projectID string, r Request) (View, error)) error {
	r, err := bind(c)
	if err != nil {
		return err
	}
	return httpx.Reply(c)(fn(c.Request().Context(), httpx.ProjectID(c), r))
}

func (h handler) campaignTransactions(c echo.Context) error {
	return h.with(c, func(ctx context.Context, p string, r Request) (View, error) {
		return h.svc.CampaignTransactions(ctx, p, c.Param("campaignId"), r)
	})
}

func (h handler) cardTransactions(c echo.Context) error {
	return h.with(c, func(ctx context.Context, p string, r Request) (View, error) {
		return h.svc.CardTransactions(ctx, loyalty.CardRef{Project: p, Campaign: c.Param("campaignId"), Member: c.Param("memberId")}, r)
	})
}

// anyCampaignTransactions is a loyalty or gift campaign's export (the
// campaigns' route serves both; the loyalties' route loyalty ones only).
func (h handler) anyCampaignTransactions(c echo.Context) error {
	return h.with(c, func(ctx context.Context, p string, r Request) (View, error) {
		v, err := h.svc.CampaignTransactions(ctx, p, c.Param("campaignId"), r)
		if notFound(err) {
			return h.svc.GiftCampaignTransactions(ctx, p, c.Param("campaignId"), r)
		}
		return v, err
	})
}

// anyCardTransactions is a loyalty card's or a gift card's export (the
// vouchers' route serves both).
func (h handler) anyCardTransactions(c echo.Context) error {
	return h.with(c, func(ctx context.Context, p string, r Request) (View, error) {
		v, err := h.svc.CardTransactions(ctx, loyalty.CardRef{Project: p, Member: c.Param("memberId")}, r)
		if notFound(err) {
			return h.svc.GiftCardTransactions(ctx, p, c.Param("memberId"), r)
		}
		return v, err
	})
}

func notFound(err error) bool {
	var e *apierr.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

func (h handler) pointsExpiration(c echo.Context) error {
	return h.with(c, func(ctx context.Context, p string, r Request) (View, error) {
		return h.svc.PointsExpiration(ctx, p, c.Param("campaignId"), r)
	})
}

func (h handler) orders(c echo.Context) error {
	return h.with(c, func(ctx context.Context, p string, r Request) (View, error) {
		return h.svc.Create(ctx, p, Order, r, scope{})
	})
}

func (h handler) create(c echo.Context) error {
	return h.with(c, func(ctx context.Context, p string, r Request) (View, error) {
		if r.ExportedObject == nil || *r.ExportedObject == "" {
			return View{}, invalid("exported_object", "is required; exportable: "+objectNames)
		}
		return h.svc.Create(ctx, p, *r.ExportedObject, r, scope{})
	})
}

func (h handler) get(c echo.Context) error {
	return httpx.Reply(c)(h.svc.Get(c.Request().Context(), httpx.ProjectID(c), c.Param("id")))
}

func (h handler) delete(c echo.Context) error {
	if err := h.svc.Delete(c.Request().Context(), httpx.ProjectID(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h handler) list(c echo.Context) error {
	spec := listq.Spec{Orders: []string{"-created_at", "created_at", "status", "-status"}, Pages: true}
	return httpx.WithList(c, spec, func(lq listq.Query) (any, error) {
		if lq.Key == "created_at" {
			lq.Key = "id" // ids are in creation order
		}
		vs, total, more, next, err := h.svc.List(c.Request().Context(), httpx.ProjectID(c), lq)
		return listq.List[View]{DataRef: "exports", Data: vs, Total: &total, More: more, Next: next}, err
	})
}

// download serves a part of a DONE export's file: Range for resumed
// downloads, gzip when asked for and no range is.
func (h handler) download(c echo.Context) error {
	ctx := c.Request().Context()
	id, _ := identity.From(ctx)
	projectID, exportID := id.ProjectID, c.Param("id")
	if tok := c.QueryParam("token"); tok != "" {
		p, e, err := h.svc.tokens.Verify(tok, h.svc.clock.Now())
		if err != nil {
			return apierr.Unauthorized("The download token is invalid or has expired; read the export again for a fresh link.")
		}
		if p != projectID || e != exportID {
			return apierr.NotFound("export", exportID)
		}
	} else if id.Kind == identity.KindDownload {
		return apierr.Unauthorized("Send the export's download token.")
	}
	part := 1
	if s := c.QueryParam("part"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100000 {
			return apierr.InvalidQuery("part", "must be a part number from 1, got "+strconv.Quote(s))
		}
		part = n
	}
	e, err := h.svc.get(ctx, h.svc.pool, projectID, exportID)
	if err != nil {
		return err
	}
	if e.Status != Done || e.RunID == nil {
		return &apierr.Error{Status: http.StatusConflict, Key: "export_not_ready", Message: "Export not ready",
			Details: fmt.Sprintf("Export %s is %s; its file can be downloaded once it is DONE.", e.ID, e.Status)}
	}
	if err := h.svc.held(ctx, projectID, e); err != nil {
		return err
	}
	if part > len(e.Parts) {
		return apierr.InvalidQuery("part", fmt.Sprintf("export %s has %d part(s)", e.ID, len(e.Parts)))
	}
	accept := c.Request().Header.Values(echo.HeaderAccept)
	mt, ok := fileType(accept)
	if !ok {
		return notAcceptable(accept)
	}
	size := e.Parts[part-1].Bytes
	name := e.ID + ".csv"
	if len(e.Parts) > 1 {
		name = fmt.Sprintf("%s-part%d.csv", e.ID, part)
	}
	w := c.Response()
	hdr := w.Header()
	hdr.Set(echo.HeaderContentType, mt+"; charset=utf-8")
	hdr.Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s"`, name))
	etag := fmt.Sprintf(`"%s-%d-%d"`, e.ID, part, size)
	hdr.Set("ETag", etag)
	hdr.Set("Cache-Control", "private, no-store")
	hdr.Add(echo.HeaderVary, echo.HeaderAccept+", "+echo.HeaderAcceptEncoding)
	r := &partReader{ctx: ctx, svc: h.svc, run: runRef{Project: projectID, Export: e.ID, Run: *e.RunID}, part: part - 1, size: size}
	modified := e.CreatedAt
	if e.UpdatedAt != nil {
		modified = *e.UpdatedAt
	}
	req := c.Request()
	if rg := req.Header.Get("Range"); strings.Contains(rg, ",") {
		// One range at a time: many small ranges would read a chunk each.
		// A server may ignore Range; the whole part is the answer.
		req.Header.Del("Range")
	}
	if req.Header.Get("Range") == "" && acceptsGzip(req) {
		hdr.Set(echo.HeaderContentEncoding, "gzip")
		hdr.Set("ETag", "W/"+strings.TrimSuffix(etag, `"`)+`-gzip"`)
		w.WriteHeader(http.StatusOK)
		if c.Request().Method == http.MethodHead {
			return nil
		}
		zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if _, err := io.Copy(zw, r); err != nil {
			return nil // the status is sent: the client sees a cut stream
		}
		_ = zw.Close()
		return nil
	}
	http.ServeContent(&jsonErrors{ResponseWriter: w, requestID: w.Header().Get(apierr.HeaderRequestID)}, req, "", modified, r)
	return nil
}

// jsonErrors turns the plain-text errors of http.ServeContent (416 for a
// range past the end, 412 for a failed precondition) into the
// interface's JSON errors.
type jsonErrors struct {
	http.ResponseWriter
	requestID string
	failed    bool
}

func (j *jsonErrors) WriteHeader(code int) {
	if code < 400 {
		j.ResponseWriter.WriteHeader(code)
		return
	}
	j.failed = true
	h := j.Header()
	h.Del(echo.HeaderContentDisposition)
	h.Del("Content-Length")
	h.Set(echo.HeaderContentType, "application/json")
	j.ResponseWriter.WriteHeader(code)
	msg, details := http.StatusText(code), "The request's preconditions do not hold for this file."
	if code == http.StatusRequestedRangeNotSatisfiable {
		details = "The range starts past the end of the file (" + h.Get("Content-Range") + ")."
	}
	b, _ := json.Marshal(apierr.Error{Status: code, Key: strings.ToLower(strings.ReplaceAll(msg, " ", "_")), Message: msg,
		Details: details, RequestID: j.requestID})
	_, _ = j.ResponseWriter.Write(b)
}

func (j *jsonErrors) Write(b []byte) (int, error) {
	if j.failed {
		return len(b), nil // ServeContent's own text
	}
	return j.ResponseWriter.Write(b)
}

func (j *jsonErrors) Unwrap() http.ResponseWriter { return j.ResponseWriter }

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values(echo.HeaderAcceptEncoding) {
		for _, enc := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(enc), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			if _, q, ok := strings.Cut(params, "q="); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(q), 64)
				return err == nil && f > 0
			}
			return true
		}
	}
	return false
}

// partReader reads a part of a file from its chunks, a chunk at a time,
// seeking to where a Range starts without reading what comes before.
type partReader struct {
	ctx                  context.Context
	svc                  *Service
	run                  runRef
	part                 int
	size, pos            int64
	chunk                []byte
	chunkStart, chunkEnd int64
}

func (r *partReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	}
	if offset < 0 {
		return 0, errors.New("exports: seek before the start")
	}
	r.pos = offset
	return offset, nil
}

func (r *partReader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if r.chunk == nil || r.pos < r.chunkStart || r.pos >= r.chunkEnd {
		var err error
		if r.chunkStart, r.chunk, err = r.svc.chunkAt(r.ctx, r.run, r.part, r.pos); err != nil {
			return 0, err
		}
		r.chunkEnd = r.chunkStart + int64(len(r.chunk))
		if r.pos >= r.chunkEnd {
			return 0, io.ErrUnexpectedEOF
		}
	}
	n := copy(p, r.chunk[r.pos-r.chunkStart:])
	r.pos += int64(n)
	return n, nil
}

// tokens lets tests make links as the service does.
func (s *Service) Tokens() dltoken.Keys { return s.tokens }
