package tenancy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tallyhq/tally/tenancy"
)

// Token issue takes no lock on the project's row (a GLOBAL table on
// CockroachDB); SERIALIZABLE keeps concurrent issues to MaxTokens: with 10
// places left, 30 issues at once get 10 tokens and 20 refusals.
func TestConcurrentTokenIssuesStopAtTheCap(t *testing.T) {
	ctx := context.Background()
	pool := directory(t)
	p, key, _ := projectWithKey(t, pool)
	if _, err := pool.Exec(ctx, `INSERT INTO oauth_tokens (token_hash, project_id, app_id, scopes, created_at, expires_at)
		SELECT 'h' || g, $1, $2, 'api', now(), now() + INTERVAL '1 hour' FROM generate_series(1, $3::INT8) AS g`,
		p.ID, key.AppID, tenancy.MaxTokens-10); err != nil {
		t.Fatal(err)
	}
	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	issued, refused := 0, 0
	start := make(chan struct{})
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, _, err := r.IssueToken(ctx, key, []string{"api"}, tenancy.Binding{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				issued++
			case errors.Is(err, tenancy.ErrTooManyTokens):
				refused++
			default:
				t.Errorf("issue: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	var live int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM oauth_tokens WHERE project_id = $1 AND expires_at > $2`, p.ID, time.Now()).
		Scan(&live); err != nil {
		t.Fatal(err)
	}
	if issued != 10 || refused != 20 || live != tenancy.MaxTokens {
		t.Fatalf("%d issued, %d refused, %d live: want 10, 20 and %d", issued, refused, live, tenancy.MaxTokens)
	}
}

// An issue does not wait on the project's row: with that row locked by
// another transaction (an update of the project, say), a token is issued
// at once. It used to be locked FOR UPDATE by every issue.
func TestTokenIssueTakesNoLockOnTheProject(t *testing.T) {
	ctx := context.Background()
	pool := directory(t)
	p, key, _ := projectWithKey(t, pool)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM projects WHERE id = $1 FOR UPDATE`, p.ID); err != nil {
		t.Fatal(err)
	}
	r := tenancy.NewResolver(pool, tenancy.ResolverOptions{})
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, _, err := r.IssueToken(ictx, key, []string{"api"}, tenancy.Binding{}); err != nil {
		t.Fatalf("a token issue while the project's row is locked: %v", err)
	}
}
