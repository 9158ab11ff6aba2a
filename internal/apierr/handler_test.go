package apierr_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/tallyhq/tally/internal/apierr"
	"github.com/tallyhq/tally/internal/cpushare"
	"github.com/tallyhq/tally/internal/db"
)

// The shares and bounded waits answer 503 with a key that says which, and
// Retry-After, never 500: a client's SDK retries them.
func TestSheddingAnswers503WithRetryAfter(t *testing.T) {
	for _, c := range []struct {
		err error
		key string
	}{
		{cpushare.ErrPaced, "project_over_share"},
		{db.ErrOverShare, "project_over_share"},
		{db.ErrContended, "resource_busy"},
		{db.ErrAmbiguous, "outcome_unknown"},
		{db.ErrUnavailable, "service_unavailable"},
		{context.DeadlineExceeded, "service_unavailable"},
	} {
		e := apierr.From(fmt.Errorf("wrapped: %w", c.err))
		if e.Status != http.StatusServiceUnavailable || e.Key != c.key || e.Header.Get("Retry-After") == "" || e.Details == "" {
			t.Errorf("%v: %d %s Retry-After %q details %q", c.err, e.Status, e.Key, e.Header.Get("Retry-After"), e.Details)
		}
	}
}
