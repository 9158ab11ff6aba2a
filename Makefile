# The two commands of the README: `make run` and `make test`.
GO ?= go
# -trimpath: a package's compiled form no longer depends on the directory
# of the checkout, so a clean clone at a new path (CI's) finds in Go's build
# cache every package that has not changed since the last run, where the
# directory used to be part of every project package's cache key.
GOFLAGS += -trimpath
export GOFLAGS
BIN := bin/tally
FUZZ_N ?= 20000
FUZZ_SEED ?= 0

.PHONY: run test build bench fuzz vet fmt check-fmt clean

build:
	$(GO) build -o $(BIN) ./cmd/tally

## run: the whole platform locally (PostgreSQL servers under .tally/, router on :8080)
run: build
	@scripts/ensure-postgres.sh
	./$(BIN) dev

# The tests that compare latencies, run once more without the race detector
# (which multiplies a request's CPU) and with nothing else running.
TIMED_TESTS := TestANoisyNeighbourDoesNotSlowAnotherProject
TIMED_PKGS := ./regional/engine/e2e/

# The HTTP fuzz test runs without the race detector: it looks for answers
# (a 5xx, a body that is not JSON, a slow one) over 1,200 random requests,
# which the detector made some 8 times slower (193 of the router package's
# 330 s on a busy machine; 24 s without it; the race pass's last package); the handlers it
# reaches run under the detector in their own packages' tests, and `make
# fuzz` runs it at length with the detector on.
NO_RACE_TESTS := TestFuzzEveryRoute

# The test processes of one go test share its database servers (see
# internal/dbtest/pool.go): each package no longer starts and migrates its own.
TESTPOOL := $(GO) run ./internal/dbtest/testpool --

# CockroachDB runs a transaction that names no isolation SERIALIZABLE:
# the concurrency-heavy tests (ledger races, stacked redemptions and their
# rollbacks, exports, the outbox) once more with PostgreSQL's default the
# same, so every statement that can meet a serialization failure there does
# here (TALLY_PG_SETTINGS reaches every server the test helper starts).
SERIALIZABLE := TALLY_PG_SETTINGS="default_transaction_isolation=serializable"
SERIALIZABLE_PKGS := ./regional/loyalty/ ./regional/loyalty/e2e/ ./regional/loyalty/program/e2e/ ./regional/redemptions/ ./regional/redemptions/e2e/ ./regional/async/ ./regional/exports/ ./regional/exports/e2e/
SERIALIZABLE_ENGINE := TestLoyaltyCardsPayWithRewardsInStacks|TestConcurrentCardsKeepTheRewardsStock|TestStackedRedemptionAllOrNothing|TestConcurrentRedemptionsKeepTheQuantity|TestLockSessionReservesTheVoucher|TestThirtyRollbacksOfOneStacksChildrenAnswerAtOnce|TestLockOrderHoldsForEveryPairOfWriters|TestAHotCodeCountsExactlyUnderRedemptionsAndRollbacks|TestRedeemersOfOneCodeDoNotWaitOnEachOther|TestAHotCodeCountsExactlyThroughAQuantityChange|TestAHotCodeOnShardsAcceptsExactlyItsQuantity|TestRedeemersOfOneCodeDoNotWaitOnItsRowOrEachOthersShards
SERIALIZABLE_CAMPAIGNS := TestVouchersCountIsExactUnderConcurrentWriters|TestAddingToVouchersCountTakesNoTurnOnTheCampaign

# The race pass starts its longest packages first (their times in a clean
# run, longest first), so that its last minutes are short packages on both of
# go test's slots, not one long package on one slot with the other idle: go
# test builds and runs packages in the order they are named, a package named
# twice once. Not the router: its ring tests bound a peer call's latency,
# which the compile of everything else at the start of the pass stretched
# past their deadline (two failed so in a clean run); it runs last, as the
# order of go list puts it.
SLOW_FIRST := ./regional/engine/e2e/ ./management/ ./regional/loyalty/program/e2e/ ./regional/qualifications/ ./deploy/ ./regional/exports/e2e/ ./tenancy/ ./regional/ ./regional/redemptions/e2e/ ./terraform/ ./regional/webhooks/ ./regional/segments/e2e/ ./regional/vouchers/e2e/

## test: vet, format check, every test with the race detector on real PostgreSQL servers, then the timed tests without it, then the concurrency-heavy ones at CockroachDB's default isolation
test:
	@scripts/ensure-postgres.sh
	@date -u +'== %T vet and format'
	@$(MAKE) --no-print-directory check-fmt vet
	@date -u +'== %T race pass'
	$(TESTPOOL) $(GO) test -race -ldflags=-w -count=1 -timeout 20m -skip '^$(NO_RACE_TESTS)$$' $(SLOW_FIRST) ./...
	@date -u +'== %T HTTP fuzz test'
	$(TESTPOOL) $(GO) test -count=1 -timeout 5m -run '^$(NO_RACE_TESTS)$$' ./router/
	@date -u +'== %T timed tests'
	$(GO) test -count=1 -timeout 5m -run '^($(TIMED_TESTS))$$' -v $(TIMED_PKGS)
	@date -u +'== %T order import'
	$(GO) test -count=1 -timeout 5m -run '^TestOrderImport$$' ./regional/orders/e2e/
	@date -u +'== %T serializable pass'
	$(SERIALIZABLE) $(TESTPOOL) $(GO) test -count=1 -timeout 10m $(SERIALIZABLE_PKGS)
	@date -u +'== %T serializable tests'
	$(SERIALIZABLE) $(TESTPOOL) $(GO) test -count=1 -timeout 10m -run '^($(SERIALIZABLE_ENGINE)|$(SERIALIZABLE_CAMPAIGNS)|TestTheServersTakeTheRunsSettings)$$' ./regional/engine/e2e/ ./regional/engine/stacked/ ./regional/campaigns/e2e/ ./internal/db/
	@date -u +'== %T done'

## bench: the benchmark harness; writes docs/benchmarks.md
bench: build
	@scripts/ensure-postgres.sh
	bench/run.sh

## fuzz: the HTTP fuzz test at length (make test runs 1,200 requests); FUZZ_N=… FUZZ_SEED=… to choose
fuzz:
	@scripts/ensure-postgres.sh
	$(GO) test -race -count=1 -timeout 60m -run TestFuzzEveryRoute -v ./router -fuzzhttp.n $(FUZZ_N) -fuzzhttp.seed $(FUZZ_SEED)

vet:
	$(GO) vet ./...

check-fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w .

clean:
	rm -rf bin .tally
