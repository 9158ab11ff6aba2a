package stacktest

import (
	"time"
)

// MetadataSchema creates the project's metadata schema for resource
// (its properties as the management API takes them) and returns it once
// the project's cluster serves it, so the writes that follow are checked
// against it.
func (a API) MetadataSchema(resource string, properties map[string]any) map[string]any {
	a.T.Helper()
	r := a.E.Do(a.T, "POST", "http://api.localhost/management/v1/projects/"+a.P.ID+"/metadata-schemas", a.E.MgmtHeader(),
		map[string]any{"related_object": resource, "properties": properties})
	if r.Status != 200 {
		a.T.Fatalf("create the %s metadata schema: %d %s", resource, r.Status, r.Body)
	}
	Eventually(a.T, 5*time.Second, "the "+resource+" metadata schema served", func() bool {
		return a.Do("GET", "/v1/metadata-schemas/"+resource, nil).Status == 200
	})
	return r.JSON(a.T)
}

// CustomerTiers is MetadataSchema for customers whose metadata key tier
// must be one of tiers: a refusal quotes the tier refused ("actual value
// is '…'"), as the permanent-deletion tests of refused items need.
func (a API) CustomerTiers(tiers ...string) {
	a.T.Helper()
	eq := make([]any, len(tiers))
	for i, t := range tiers {
		eq[i] = t
	}
	a.MetadataSchema("customer", map[string]any{"tier": map[string]any{"type": "string", "eq": eq}})
}
