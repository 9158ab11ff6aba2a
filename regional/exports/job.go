package exports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/db"
	"github.com/tallyhq/tally/internal/filters"
	"github.com/tallyhq/tally/internal/ids"
	"github.com/tallyhq/tally/regional/async"
	"github.com/tallyhq/tally/regional/webhooks"
)

type jobParams struct {
	ExportID string `json:"export_id"`
}

// errGone stops a job whose export was deleted while it ran.
var errGone = errors.New("exports: the export was deleted")

// run is the export job: it makes the file and marks the export DONE, or
// ERROR with the reason. Run again after its worker died, it starts over,
// replacing what the earlier run stored.
func (s *Service) run(ctx context.Context, job *async.Job) (any, error) {
	var p jobParams
	if err := json.Unmarshal(job.Params, &p); err != nil {
		return nil, fmt.Errorf("exports: job parameters: %w", err)
	}
	e, err := s.get(ctx, s.pool, job.ProjectID, p.ExportID)
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Status == 404 {
		return map[string]any{"export_id": p.ExportID, "deleted": true}, nil
	}
	if err != nil {
		return nil, err
	}
	if e.Status == Done || e.Status == Error {
		return map[string]any{"export_id": e.ID, "status": e.Status}, nil
	}
	select { // a slot of the instance's exports
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	run := runRef{Project: job.ProjectID, Export: e.ID, Run: ids.New("run_")}
	parts, err := s.produce(ctx, job, e, run.Run)
	if errors.Is(err, errGone) {
		// Deleted, or taken over by a later run: drop what this run stored.
		return map[string]any{"export_id": e.ID, "superseded": true}, s.dropRun(context.WithoutCancel(ctx), run)
	}
	var failure *Failure
	if err != nil {
		failure = &Failure{Code: "export_failed", Message: failureMessage(err)}
	}
	// Mark it DONE or ERROR, trying again through a short outage: a job is
	// not run again, and an export left IN_PROGRESS would stay so.
	var ferr error
	for try := 0; try < 5; try++ {
		if try > 0 {
			time.Sleep(time.Duration(try) * time.Second)
		}
		if ferr = s.finish(context.WithoutCancel(ctx), run, parts, failure); ferr == nil || errors.Is(ferr, errGone) {
			break
		}
	}
	if errors.Is(ferr, errGone) {
		return map[string]any{"export_id": e.ID, "superseded": true}, s.dropRun(context.WithoutCancel(ctx), run)
	}
	if ferr != nil {
		return nil, ferr
	}
	if err != nil {
		return nil, err
	}
	var rows int64
	for _, p := range parts {
		rows += p.Rows
	}
	return map[string]any{"export_id": e.ID, "rows": rows, "parts": len(parts)}, nil
}

func failureMessage(err error) string {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return ae.Details
	}
	if errors.Is(err, db.ErrUnavailable) {
		return "The database could not be reached while the file was made; request the export again."
	}
	return "The file could not be made; request the export again."
}

// finish marks the export DONE with its parts, or ERROR, and raises its
// webhook notice, in one transaction.
func (s *Service) finish(ctx context.Context, run runRef, parts []Part, failure *Failure) error {
	projectID, id := run.Project, run.Export
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		status, event := Done, EventCompleted
		var partsJSON, failJSON []byte
		var err error
		if failure != nil {
			status, event = Error, EventFailed
			if failJSON, err = json.Marshal(failure); err != nil {
				return err
			}
		} else if partsJSON, err = json.Marshal(parts); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE exports SET status = $3, parts = $4, error = $5, updated_at = $6
			WHERE project_id = $1 AND id = $2 AND run_id = $7`, projectID, id, status, partsJSON, failJSON, s.now(), run.Run)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errGone
		}
		e, err := s.get(ctx, tx, projectID, id)
		if err != nil {
			return err
		}
		v, err := s.view(ctx, projectID, e)
		if err != nil {
			return err
		}
		// What an earlier, superseded run left.
		if _, err := tx.Exec(ctx, `DELETE FROM export_chunks WHERE project_id = $1 AND export_id = $2 AND run_id <> $3`,
			projectID, id, run.Run); err != nil {
			return err
		}
		return s.notify.Emit(ctx, tx, webhooks.Notice{Project: projectID, Type: event, Entity: id, Object: map[string]any{"export": v}})
	})
}

// dropRun deletes what one run of an export stored.
func (s *Service) dropRun(ctx context.Context, run runRef) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM export_chunks WHERE project_id = $1 AND export_id = $2 AND run_id = $3`, run.Project, run.Export, run.Run)
	return err
}

// chunk is a piece of a part's file on its way to the database.
type chunk struct {
	part   int
	offset int64
	data   []byte
	rows   int64 // rows written so far, all parts
}

// produce streams the export's rows from one snapshot into CSV chunks, and
// the chunks into export_chunks: a reader and a writer passing the same
// chunkBuffers buffers back and forth, so memory stays bounded whatever the
// size.
func (s *Service) produce(ctx context.Context, job *async.Job, e export, run string) ([]Part, error) {
	// This run owns the export from here; an earlier one still going
	// finds its run no longer named at its next chunk and stops.
	tag, err := s.pool.Exec(ctx, `UPDATE exports SET status = $3, done_rows = 0, updated_at = $4, run_id = $5
		WHERE project_id = $1 AND id = $2`, job.ProjectID, e.ID, InProgress, s.now(), run)
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		return nil, errGone
	}
	o, ok := s.objects[e.Object]
	if !ok {
		return nil, fmt.Errorf("exports: unknown object %q", e.Object)
	}
	var p Parameters
	if err := json.Unmarshal(e.Parameters, &p); err != nil {
		return nil, err
	}
	rawFilters, err := json.Marshal(p.Filters)
	if err != nil {
		return nil, err
	}
	fields := o.metadataFilters(rawFilters)
	f, err := filters.FromJSON(rawFilters, fields, "parameters.filters", "invalid_export_params")
	if err != nil {
		return nil, err
	}
	cs := make([]column, len(p.Fields))
	exprs := make([]string, len(p.Fields))
	for i, k := range p.Fields {
		c, ok := o.column(k)
		if !ok {
			return nil, fmt.Errorf("exports: %s has no field %q", o.name, k)
		}
		cs[i], exprs[i] = c, c.sql
	}
	cond, args := f.SQL(fields, []any{job.ProjectID}, s.now())
	orderBy := o.orderBy(p.Order)

	// One snapshot for the count and the rows: writes committed while the
	// file is made are in neither (a historical read on CockroachDB).
	tx, err := s.pool.BeginSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var total int64
	if err := tx.QueryRow(ctx, `SELECT count(*) `+o.from+` AND `+cond, args...).Scan(&total); err != nil {
		return nil, err
	}
	if _, err := s.pool.Exec(ctx, `UPDATE exports SET total_rows = $3 WHERE project_id = $1 AND id = $2 AND run_id = $4`,
		job.ProjectID, e.ID, total, run); err != nil {
		return nil, err
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan chunk, chunkBuffers-1)
	bufs := newChunkPool(s.opt.ChunkBytes)
	werr := make(chan error, 1)
	go func() {
		err := s.store(wctx, job, e.ID, run, total, chunks, bufs)
		if err != nil {
			cancel() // stops the reader at its next chunk
		}
		werr <- err
	}()
	parts, rerr := s.encode(ctx, tx, o, cs, exprs, cond, orderBy, args, bufs, chunks, wctx.Done())
	if rerr != nil {
		cancel()
	}
	close(chunks)
	// The writer's error is the cause, unless the reader's failure is
	// what stopped it.
	if err := <-werr; err != nil && (rerr == nil || !errors.Is(err, context.Canceled)) {
		return nil, err
	}
	return parts, rerr
}

// encode reads the rows and writes them as CSV chunks to out.
func (s *Service) encode(ctx context.Context, tx pgx.Tx, o object, cs []column, exprs []string, cond, orderBy string,
	args []any, bufs *chunkPool, out chan<- chunk, stop <-chan struct{}) ([]Part, error) {
	rows, err := tx.Query(ctx, `SELECT `+strings.Join(exprs, ", ")+` `+o.from+` AND `+cond+` ORDER BY `+orderBy, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cells := make([]cell, len(cs))
	dests := make([]any, len(cs))
	for i := range cs {
		cells[i].kind = cs[i].kind
		dests[i] = cells[i].dest()
	}
	header := make([]byte, 0, 256)
	for i, c := range cs {
		if i > 0 {
			header = append(header, ',')
		}
		header = appendField(header, []byte(c.label))
	}
	header = append(header, '\n')

	w := newChunker(bufs, s.opt.ChunkBytes, header, out, stop)
	if err := w.startPart(); err != nil {
		return nil, err
	}
	var field []byte
	for rows.Next() {
		if w.partRows() == int64(s.opt.PartRows) {
			if err := w.startPart(); err != nil {
				return nil, err
			}
		}
		if err := rows.Scan(dests...); err != nil {
			return nil, err
		}
		for i := range cells {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			field = cells[i].appendTo(field[:0])
			w.buf = appendField(w.buf, field)
		}
		w.buf = append(w.buf, '\n')
		if err := w.endRow(); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	return w.parts, nil
}

// appendField writes one CSV field, quoted when it holds a comma, a quote,
// a line break or leading or trailing space (RFC 4180, as encoding/csv).
func appendField(b, f []byte) []byte {
	if !needsQuotes(f) {
		return append(b, f...)
	}
	b = append(b, '"')
	for {
		i := bytes.IndexByte(f, '"')
		if i < 0 {
			b = append(b, f...)
			break
		}
		b = append(b, f[:i+1]...)
		b = append(b, '"')
		f = f[i+1:]
	}
	return append(b, '"')
}

func needsQuotes(f []byte) bool {
	if len(f) == 0 {
		return false
	}
	if f[0] == ' ' || f[0] == '\t' || f[len(f)-1] == ' ' {
		return true
	}
	for _, c := range f {
		switch c {
		case ',', '"', '\n', '\r':
			return true
		}
	}
	return false
}

// store writes chunks as they come, each with the export's progress.
func (s *Service) store(ctx context.Context, job *async.Job, id, run string, total int64, in <-chan chunk, bufs *chunkPool) error {
	for c := range in {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO export_chunks (project_id, export_id, run_id, part, offset_bytes, data) VALUES ($1, $2, $3, $4, $5, $6)`,
			job.ProjectID, id, run, c.part, c.offset, c.data)
		b.Queue(`UPDATE exports SET done_rows = $3 WHERE project_id = $1 AND id = $2 AND run_id = $4`, job.ProjectID, id, c.rows, run)
		br := s.pool.SendBatch(ctx, b)
		_, err := br.Exec()
		var tag pgconn.CommandTag
		if err == nil {
			tag, err = br.Exec()
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err == nil && tag.RowsAffected() == 0 {
			err = errGone
		}
		if err != nil {
			return err
		}
		bufs.put(c.data) // sent: pgx copied it into its own buffers
		pct := 0
		if total > 0 {
			pct = int(c.rows * 100 / total)
		}
		if err := job.Progress(ctx, min(pct, 99)); err != nil {
			return err
		}
	}
	return nil
}
