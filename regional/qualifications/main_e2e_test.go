package qualifications_test

import (
	"testing"

	"github.com/tallyhq/tally/devstack/stacktest"
	"github.com/tallyhq/tally/internal/dbtest"
)

func TestMain(m *testing.M) {
	stacktest.TraceRequests() // TestAQualificationReadsInTwoRoundTrips counts them
	dbtest.Main(m)
}
