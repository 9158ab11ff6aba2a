package exports

import "context"

// runRef names one run of an export: a run writes its file's chunks under
// its own id, so that a run superseded by a later one of the same export
// drops its own chunks and never the later one's.
type runRef struct {
	Project, Export, Run string
}

// chunkAt reads the chunk of run's file part that holds byte offset pos:
// its offset in the part and its bytes.
func (s *Service) chunkAt(ctx context.Context, run runRef, part int, pos int64) (start int64, data []byte, err error) {
	err = s.pool.QueryRow(ctx, `SELECT offset_bytes, data FROM export_chunks
		WHERE project_id = $1 AND export_id = $2 AND run_id = $3 AND part = $4 AND offset_bytes <= $5
		ORDER BY offset_bytes DESC LIMIT 1`, run.Project, run.Export, run.Run, part, pos).Scan(&start, &data)
	return start, data, err
}
