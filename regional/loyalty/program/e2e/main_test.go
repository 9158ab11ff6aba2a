package e2e_test

import (
	"testing"

	"github.com/tallyhq/tally/internal/dbtest"
)

// TestMain stops the process's database servers, and drops the copies of
// their templates made ahead, when the tests are done.
func TestMain(m *testing.M) { dbtest.Main(m) }
