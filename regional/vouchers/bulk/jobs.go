package bulk

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/clock"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/httpx"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/vouchers"
)

// The voucher jobs of the interface's background-task table: imports of
// vouchers (JSON or CSV; standalone or into a campaign, taking its
// template) and bulk metadata updates. Each job reads its input once,
// writes it in chunks of importChunk, one transaction a chunk with its
// checkpoint, so a job run again after a crash goes on after the last
// committed chunk; rows that fail (a taken code, a code twice in the
// input, a bad value) are reported, the others written.
const (
	JobImport         = "VOUCHERS.IMPORT"
	JobImportCSV      = "VOUCHERS.IMPORT_CSV"
	JobBulkUpdate     = "VOUCHERS.BULK_UPDATE"
	JobMetadataUpdate = "VOUCHERS.METADATA_UPDATE"
	JobCampaignImport = "CAMPAIGN.VOUCHERS_IMPORT"
	JobCampaignCSV    = "CAMPAIGN.VOUCHERS_IMPORT_CSV"
)

// MaxInput is the largest input a voucher job takes.
const MaxInput = 10 << 20

// LargeBodies are the voucher jobs' paths, whose bodies may be MaxInput long.
var LargeBodies = []string{"/v1/vouchers/import", "/v1/vouchers/importCSV", "/v1/vouchers/bulk/async",
	"/v1/vouchers/metadata/async", "/v1/campaigns/*/import", "/v1/campaigns/*/importCSV"}

const importChunk = 5000

// jobInput is what a voucher job starts with: the items, as JSON, and the
// campaign they go into ("" for standalone vouchers).
type jobInput struct {
	CampaignID string            `json:"campaign_id,omitempty"`
	Items      []json.RawMessage `json:"items"`
	// Metadata is VOUCHERS.METADATA_UPDATE's: set on every item (a code).
	Metadata map[string]any `json:"metadata,omitempty"`
}

// importFailure is a row that was not written.
type importFailure struct {
	Row    int    `json:"row"`
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason"`
}

// importState is a job's checkpoint (async's chunked jobs).
type importState = async.Chunked[importFailure]

// Service runs the voucher jobs.
type Service struct {
	pool     *db.Pool
	clock    *clock.Clock
	vouchers *vouchers.Service
	wake     func() // starts the worker on a new job (Register)
	reports  async.Reports
}

// New returns the service of the voucher jobs, which write through vs;
// reports holds the reports of VOUCHERS.BULK_UPDATE.
func New(pool *db.Pool, vs *vouchers.Service, clk *clock.Clock, reports async.Reports) *Service {
	return &Service{pool: pool, vouchers: vs, clock: clk, reports: reports}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// Register registers the voucher jobs with reg and mounts their routes;
// wake starts the worker on a new job.
func (s *Service) Register(g *echo.Group, reg *async.Registry, wake func()) {
	s.wake = wake
	for _, t := range []string{JobImport, JobImportCSV, JobCampaignImport, JobCampaignCSV} {
		reg.HandleJob(t, s.importJob)
	}
	reg.HandleJob(JobBulkUpdate, s.metadataJob(true))
	reg.HandleJob(JobMetadataUpdate, s.metadataJob(false))
	g.POST("/vouchers/import", s.startImport(JobImport, false))
	g.POST("/vouchers/importCSV", s.startImport(JobImportCSV, true))
	g.POST("/campaigns/:campaignId/import", s.startImport(JobCampaignImport, false))
	g.POST("/campaigns/:campaignId/importCSV", s.startImport(JobCampaignCSV, true))
	g.POST("/vouchers/bulk/async", s.startMetadata(JobBulkUpdate))
	g.POST("/vouchers/metadata/async", s.startMetadata(JobMetadataUpdate))
}

func readInput(c echo.Context, csvFile bool) ([]byte, error) {
	var r io.Reader = c.Request().Body
	if csvFile {
		fh, err := c.FormFile("file")
		if err != nil {
			return nil, apierr.InvalidPayload("Send the CSV file as the multipart/form-data field named file.")
		}
		f, err := fh.Open()
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxInput+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxInput {
		return nil, apierr.New(http.StatusRequestEntityTooLarge, "payload_too_large", "Payload too large", "A voucher job takes at most 10 MB.")
	}
	return bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), nil
}

func (s *Service) startJob(c echo.Context, jobType string, in jobInput) error {
	ctx := c.Request().Context()
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	var act async.Action
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		act, err = async.StartJobWithInput(ctx, tx, httpx.ProjectID(c), jobType, nil, raw)
		return err
	})
	if err != nil {
		return err
	}
	if s.wake != nil {
		s.wake()
	}
	return c.JSON(http.StatusAccepted, map[string]string{"async_action_id": act.ID})
}

// runJob reads a job's input and checkpoint and runs do on its items in
// chunks of importChunk, each in one transaction that ends with the
// checkpoint, so a rerun goes on after the last committed chunk.
func (s *Service) runJob(ctx context.Context, job *async.Job,
	do func(tx pgx.Tx, in *jobInput, st *importState, from, to int) error) (importState, error) {
	var st importState
	raw, err := job.Input(ctx)
	if err != nil {
		return st, err
	}
	var in jobInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return st, err
	}
	if _, err := job.Resume(ctx, &st); err != nil {
		return st, err
	}
	err = async.RunChunks(ctx, job, &st, len(in.Items), importChunk, func(_ context.Context, tx pgx.Tx, next *importState, from, to int) error {
		return do(tx, &in, next, from, to)
	})
	return st, err
}
