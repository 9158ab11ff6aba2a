// Package conformance checks the public API's answers against the
// reference's OpenAPI description, so that a shape a strictly typed
// generated client would reject (a null where the reference types a
// non-nullable object, a string where it says integer) fails CI.
//
// It needs the reference file (../shared/reference/voucherify-openapi.json
// beside the repository, or TALLY_OPENAPI); without it the check is skipped
// (Available). Parsing the description takes seconds of CPU and holds
// hundreds of megabytes, several times more in a test binary built with the
// race detector: a test run's pool (internal/dbtest/testpool) parses it once,
// in its own process, and serves the check on a socket (Serve) that every
// test process of the run asks (EnvSocket); a test process alone parses it
// itself.
package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// knownDefects are the reference description's own mistakes: schemas that no
// answer of the reference service itself satisfies. An error is forgiven when
// the operation's path matches op (a regular expression) and the error's
// location in the body starts with field (a JSON pointer, * for any element).
var knownDefects = []struct{ op, field, why string }{
	{`^/v1/rewards`, `/parameters`, "the reward parameters oneOf: a CAMPAIGN, PRODUCT or COIN reward matches more than one branch"},
	{`^/v1/loyalties/[^/]+/rewards`, `/reward/parameters`, "the reward parameters oneOf, inside an assignment"},
	{`^/v1/loyalties/[^/]+/rewards`, `/data/*/reward/parameters`, "the reward parameters oneOf, inside an assignment"},
	{`^/v1/rewards`, `/data/*/parameters`, "the reward parameters oneOf, in a list"},
	{`^/v1/loyalties/[^/]+/reward-assignments/[^/]+/reward$`, `/parameters`, "the reward parameters oneOf, of an assignment's reward"},
	{`^/v1/loyalties/(members|[^/]+/members)/[^/]+/rewards$`, `/data/*/reward/parameters`, "the reward parameters oneOf, in a member's rewards"},
	{`^/v1/loyalties/[^/]+/tiers/[^/]+/rewards$`, `/data/*/reward/parameters`, "the reward parameters oneOf, in a tier's rewards"},
	{`^/v1/async-actions`, `/result`, "the async action result oneOf: every result shape matches several branches"},
	{`^/v1/async-actions`, `/data/*/result`, "the async action result oneOf, in a list"},
	{`/transfers$`, `/active`, "the transfer answer types the card's active flag as a string; everywhere else it is the boolean the service sends"},
	{`redemption`, `/reward`, "RedemptionRewardResult.reward: the reference types it as the reward's own fields and requires ones it never sends"},
	{`redemption`, `/redemption/reward`, "RedemptionRewardResult.reward, inside a rollback"},
	{`redemption`, `/data/*/reward`, "RedemptionRewardResult.reward, in a list"},
	{`^(/client)?/v1/redemptions`, `/redemptions/*/reward`, "RedemptionRewardResult.reward, in a stacked redemption's loyalty card paying with a reward"},
	{`^/v1/redemptions/[^/]+/rollbacks$`, `/rollbacks/*/reward`, "RedemptionRewardResult.reward, in the rollbacks of a stack with a loyalty card"},
	{`^/v1/redemptions$`, `/redemptions/*/object`, "the redemptions list item oneOf (redemption, rollback): when RedemptionRewardResult.reward fails the redemption branch, the rollback branch's object enum is reported too"},
	{`^/v1/redemptions$`, `/redemptions/*/status`, "the redemptions list item oneOf, as above: a ROLLED_BACK redemption that fails the redemption branch on RedemptionRewardResult.reward has the rollback branch's status enum reported too"},
	{`^/v1/customers/[^/]+/activit`, `/data/*/data/data`, "CustomerActivityData is a oneOf of 80-odd event shapes whose branches require nothing, so every entry matches many"},
	{`^/v1/loyalties/(members|[^/]+/members)/[^/]+/activity$`, `/data/*/data/data`, "MemberActivityData is a oneOf of 26 event shapes whose branches require nothing, so every entry matches many"},
	{`^/v1/async-actions`, `/type`, "exports and bulk events run as async actions of types (EXPORT.CSV, EVENTS.BULK_CREATE) that the reference's closed list lacks (README)"},
	{`^/v1/async-actions`, `/data/*/type`, "the async action type EXPORT.CSV, in a list"},
	{`^/v1/async-actions`, `/async_actions/*/type`, "the async action types the reference's closed list lacks, in the list as it names its array"},
	{`^/v1/async-actions`, `/async_actions/*/result`, "the async action result oneOf, in the list as it names its array"},
	{`/transactions/export$`, `/parameters/filters/created_at/conditions/$after`, "the loyalty export's answer types $after as one value while its request, the specification and GET /v1/exports/{id} give an array: filters are echoed as they were sent"},
	{`^/v1/exports`, `/parameters/filters/created_at/conditions/$after`, "the export object types $after as an array of a oneOf whose branches overlap, the loyalty export's answer as one value: filters are echoed as they were sent"},
	{`/export$`, `/parameters/filters/campaign_id/conditions/$in`, "the export filters type $in's values with maxLength 1 (maxItems meant): its own example has a campaign id there"},
	{`^/v1/exports`, `/parameters/filters/campaign_id/conditions/$in`, "the export filters' $in maxLength, as above"},
	{`/export$`, `/parameters/filters/voucher_id/conditions/$in`, "the export filters' $in maxLength, as for campaign_id: a card's export names its card there"},
	{`^/v1/exports`, `/exports/*/parameters/filters/campaign_id/conditions/$in`, "the export filters' $in maxLength, in a list"},
	{`^/v1/(vouchers|campaigns)`, `/discount`, "the Discount oneOf: a UNIT discount with effect ADD_MANY_ITEMS matches both DiscountUnit (whose effects include ADD_MANY_ITEMS) and DiscountUnitMultiple"},
	{`^/v1/(vouchers|campaigns)`, `/vouchers/*/discount`, "the Discount oneOf, in a list"},
	{`^/v1/campaigns`, `/voucher/discount`, "the Discount oneOf, in a campaign's voucher"},
	{`^/v1/campaigns`, `/campaigns/*/voucher/discount`, "the Discount oneOf, in a list of campaigns"},
	{`^/v1/templates/campaigns$`, `/campaign_template`, "the templates list requires a campaign_template property it does not describe; the list's array is data, as its data_ref says"},
	{`^/v1/publications`, `/channel`, "the publication answer's channel enum lists only API, while its own description and the request take a channel of the caller's"},
	{`^(/client)?/v1/(validations|redemptions)`, `/redeemables/*/result`, "the RedeemableResult oneOf: its five branches (voucher, gift card, loyalty card, promotion tier, stack) require nothing, so every result matches all of them"},
	{`^(/client)?/v1/(validations|redemptions)`, `/redeemables/*/status`, "the validated redeemable's oneOf (APPLICABLE, INAPPLICABLE, SKIPPED): when the RedeemableResult ambiguity above fails every branch, the other branches' status enums are reported too"},
	{`^/v1/locations`, `/shape`, "PolygonCoordinates types a polygon's positions as integers and one level short (interface-notes h9.6), so no GeoJSON polygon matches either branch of the shape oneOf"},
	{`^/v1/locations$`, `/data/*/shape`, "the shape oneOf's integer coordinates, as above, in a list"},
	{`^/v1/publications$`, `/publications/*`, "the list item oneOf: a publication with one voucher matches both ListPublicationsItemValidSingleVoucher and ListPublicationsItemValidMultipleVouchers, which requires nothing"},
}

// Exchange is one answer of the public API: the request's method and path
// and the answer's status and JSON body.
type Exchange struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	Body   []byte `json:"body"`
}

var reference struct {
	once sync.Once
	doc  *openapi3.T
	ops  []refOp
	err  error
	path string
}

type refOp struct {
	re     *regexp.Regexp
	method string
	op     *openapi3.Operation
	tmpl   string
}

// ReferencePath is where the reference description is, "" when absent:
// TALLY_OPENAPI, else shared/reference/voucherify-openapi.json beside the
// repository, found from the working directory (a test runs in its
// package's directory, the tools in the repository's) by going up to the
// directory that holds go.mod. The source file's own path is not used: a
// build with -trimpath (make test's) records module paths, not directories.
func ReferencePath() string {
	if p := os.Getenv("TALLY_OPENAPI"); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
	p := filepath.Join(filepath.Dir(dir), "shared", "reference", "voucherify-openapi.json")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

func load() error {
	reference.once.Do(func() {
		reference.path = ReferencePath()
		if reference.path == "" {
			return
		}
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile(reference.path)
		if err != nil {
			reference.err = err
			return
		}
		reference.doc = doc
		param := regexp.MustCompile(`\\\{[^}]+\\\}`)
		for tmpl, item := range doc.Paths.Map() {
			re := regexp.MustCompile("^" + param.ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`) + "$")
			for method, op := range item.Operations() {
				reference.ops = append(reference.ops, refOp{re: re, method: method, op: op, tmpl: tmpl})
			}
		}
		// A literal segment beats a parameter: /v1/loyalties/members/{id}
		// over /v1/loyalties/{campaignId}/members.
		sort.Slice(reference.ops, func(i, j int) bool {
			return strings.Count(reference.ops[i].tmpl, "{") < strings.Count(reference.ops[j].tmpl, "{")
		})
	})
	return reference.err
}

// clientTwins are the client-side endpoints the reference describes only
// by their server-side twins, whose answers they give.
var clientTwins = map[string]string{"/client/v1/publish": "/v1/publications", "/client/v1/vouchers": "/v1/vouchers",
	"/client/v1/customers": "/v1/customers"}

// errorsOf are what the reference finds wrong with one answer.
func errorsOf(x Exchange) []string {
	if twin, ok := clientTwins[x.Path]; ok {
		x.Path = twin
	}
	var op *refOp
	for i := range reference.ops {
		o := &reference.ops[i]
		if o.method == x.Method && o.re.MatchString(x.Path) {
			op = o
			break
		}
	}
	if op == nil || op.op.Responses == nil {
		return nil // an operation the reference does not describe
	}
	resp := op.op.Responses.Status(x.Status)
	if resp == nil || resp.Value == nil {
		return nil // a status the reference does not describe for it
	}
	media := resp.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil || media.Schema.Value == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(x.Body, &v); err != nil {
		return []string{fmt.Sprintf("%s %s → %d: the body is not JSON: %v", x.Method, op.tmpl, x.Status, err)}
	}
	schema := branchFor(media.Schema.Value, v)
	type found struct {
		prefix string
		err    error
	}
	var errs []found
	// A list whose items are a oneOf (exports of every object, async
	// actions of every type) has each item checked against its own branch,
	// as a single answer is, rather than as one failed oneOf whose every
	// branch's errors are reported.
	if m, ok := v.(map[string]any); ok {
		rest := map[string]any{}
		for k, val := range m {
			rest[k] = val
			items := listItems(schema, k)
			list, isList := val.([]any)
			if items == nil || !isList {
				continue
			}
			delete(rest, k)
			for i, e := range list {
				if err := branchFor(items, e).VisitJSON(e, openapi3.MultiErrors()); err != nil {
					errs = append(errs, found{fmt.Sprintf("/%s/%d", k, i), err})
				}
			}
		}
		v = rest
	}
	if err := schema.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		errs = append(errs, found{"", err})
	}
	var out []string
	for _, f := range errs {
		for _, se := range schemaErrors(f.err) {
			ptr := f.prefix + "/" + strings.Join(se.JSONPointer(), "/")
			if f.prefix != "" && len(se.JSONPointer()) == 0 {
				ptr = f.prefix
			}
			if forgiven(op.tmpl, ptr) {
				continue
			}
			reason := se.Reason
			if len(reason) > 200 {
				reason = reason[:200] + "…"
			}
			out = append(out, fmt.Sprintf("%s %s → %d: at %s: %s", x.Method, op.tmpl, x.Status, genericPointer(ptr), reason))
		}
	}
	return out
}

// listItems is the items schema of s's array property k when it is a
// oneOf (nil otherwise), looking through s's allOf.
func listItems(s *openapi3.Schema, k string) *openapi3.Schema {
	if p := s.Properties[k]; p != nil && p.Value != nil && p.Value.Items != nil && p.Value.Items.Value != nil &&
		len(p.Value.Items.Value.OneOf) > 0 {
		return p.Value.Items.Value
	}
	for _, a := range s.AllOf {
		if a.Value != nil {
			if it := listItems(a.Value, k); it != nil {
				return it
			}
		}
	}
	return nil
}

// branchFor picks, of a oneOf answer (a redemption or a rollback), the
// branch whose object property names the answer's object (and, for an
// export, whose exported_object names the answer's), so that its
// errors are reported, and known defects forgiven, by their own paths rather
// than as one failed oneOf.
func branchFor(s *openapi3.Schema, v any) *openapi3.Schema {
	m, ok := v.(map[string]any)
	obj, _ := m["object"].(string)
	if len(s.OneOf) == 0 || !ok || obj == "" {
		return s
	}
	exported, _ := m["exported_object"].(string)
	// Of several branches naming the object (a publication of one voucher
	// or of several), the first the answer satisfies; else the first, whose
	// errors are reported.
	var first *openapi3.Schema
	for _, b := range s.OneOf {
		if b.Value == nil {
			continue
		}
		if exported != "" && enumHas(b.Value, "exported_object", exported) || exported == "" && enumHas(b.Value, "object", obj) {
			if b.Value.VisitJSON(v) == nil {
				return b.Value
			}
			if first == nil {
				first = b.Value
			}
		}
	}
	if first != nil {
		return first
	}
	if exported != "" {
		// product and sku exports: the reference's text names them, its
		// schema has no branch for them, so there is nothing to check.
		return &openapi3.Schema{}
	}
	return s
}

func enumHas(s *openapi3.Schema, prop, v string) bool {
	if p := s.Properties[prop]; p != nil && p.Value != nil {
		for _, e := range p.Value.Enum {
			if e == v {
				return true
			}
		}
	}
	for _, a := range s.AllOf {
		if a.Value != nil && enumHas(a.Value, prop, v) {
			return true
		}
	}
	return false
}

func schemaErrors(err error) []*openapi3.SchemaError {
	var me openapi3.MultiError
	if errors.As(err, &me) {
		var out []*openapi3.SchemaError
		for _, e := range me {
			out = append(out, schemaErrors(e)...)
		}
		return out
	}
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		return []*openapi3.SchemaError{se}
	}
	return []*openapi3.SchemaError{{Reason: err.Error()}}
}

var index = regexp.MustCompile(`/[0-9]+(/|$)`)

// genericPointer writes array indexes as *, so one defect is one message.
func genericPointer(p string) string {
	for index.MatchString(p) {
		p = index.ReplaceAllString(p, "/*$1")
	}
	return p
}

// defectOps are knownDefects' operation patterns, compiled once.
var defectOps = func() []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(knownDefects))
	for i, d := range knownDefects {
		out[i] = regexp.MustCompile(d.op)
	}
	return out
}()

func forgiven(opPath, ptr string) bool {
	g := genericPointer(ptr)
	for i, d := range knownDefects {
		if defectOps[i].MatchString(opPath) && (g == d.field || strings.HasPrefix(g, d.field+"/")) {
			return true
		}
	}
	return false
}
