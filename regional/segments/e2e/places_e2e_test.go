package e2e_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tallyhq/tally/devstack/stacktest"
)

// An auto-update segment on $in_location follows its customers' geopoints:
// one inside when it is made enters by its first evaluation (bounding box
// in SQL, the shape in Go), one in the box but outside the triangle does
// not, and moving a geopoint in, into the hole and out makes the entries
// and exits, each with its notice; a customer's segments and a
// validation's live evaluation agree.
func TestSegmentInLocationFollowsGeopoints(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.segment.entered", "customer.segment.left")
	// A triangle (52,13), (52,14), (53,13), with a triangular hole.
	ring := func(pts ...[2]float64) [][]float64 {
		var out [][]float64
		for _, p := range pts {
			out = append(out, []float64{p[1], p[0]}) // [lng, lat]
		}
		return out
	}
	loc := a.OK("POST", "/v1/locations", map[string]any{"name": "Triangle", "shape": map[string]any{"type": "polygon",
		"geojson": map[string]any{"type": "Polygon", "coordinates": [][][]float64{
			ring([2]float64{52, 13}, [2]float64{52, 14}, [2]float64{53, 13}, [2]float64{52, 13}),
			ring([2]float64{52.2, 13.2}, [2]float64{52.2, 13.4}, [2]float64{52.4, 13.2}, [2]float64{52.2, 13.2}),
		}}}})["id"].(string)
	const inside, hole, boxOnly, far = "geo:52.1,13.1", "geo:52.25,13.25", "geo:52.9,13.9", "geo:10,10"
	customer := func(src, at string) string {
		return a.OK("POST", "/v1/customers", map[string]any{"source_id": src, "metadata": map[string]any{"at": at}})["id"].(string)
	}
	ann, bob, cy := customer("ann", inside), customer("bob", boxOnly), customer("cy", far)
	seg := a.OK("POST", "/v1/segments", map[string]any{"name": "In the triangle", "type": "auto-update",
		"filter": map[string]any{"metadata.at": map[string]any{"conditions": map[string]any{"$in_location": []any{loc}}}}})["id"].(string)
	waitMembers(a, seg, ann)
	if ev := hooks.Wait(t, "customer.segment.entered", 1); ev["customer"].(map[string]any)["id"] != ann {
		t.Fatalf("entered by the first evaluation: %v", ev)
	}
	move := func(src, at string) {
		a.OK("PUT", "/v1/customers/"+src, map[string]any{"metadata": map[string]any{"at": at}})
	}
	// Bob moves from the box's corner into the triangle: he enters.
	move("bob", inside)
	if ev := hooks.Wait(t, "customer.segment.entered", 2); ev["customer"].(map[string]any)["id"] != bob ||
		ev["segment"].(map[string]any)["id"] != seg {
		t.Fatalf("bob's entry: %v", ev)
	}
	waitMembers(a, seg, ann, bob)
	// Ann moves into the hole: she leaves.
	move("ann", hole)
	if ev := hooks.Wait(t, "customer.segment.left", 1); ev["customer"].(map[string]any)["id"] != ann {
		t.Fatalf("ann's exit: %v", ev)
	}
	waitMembers(a, seg, bob)
	// Cy moves in as an array of points of which one is inside; Bob leaves
	// for the box's corner.
	a.OK("PUT", "/v1/customers/cy", map[string]any{"metadata": map[string]any{"at": []any{far, inside}}})
	move("bob", boxOnly)
	hooks.Wait(t, "customer.segment.entered", 3)
	hooks.Wait(t, "customer.segment.left", 2)
	waitMembers(a, seg, cy)
	if got := customerSegments(a, "cy"); !slices.Equal(got, []string{seg}) {
		t.Fatalf("cy's segments %v", got)
	}
	if got := customerSegments(a, "bob"); len(got) != 0 {
		t.Fatalf("bob's segments %v", got)
	}
	time.Sleep(300 * time.Millisecond) // any late notice would have come
	if n, m := hooks.Count("customer.segment.entered"), hooks.Count("customer.segment.left"); n != 3 || m != 2 {
		t.Fatalf("%d entered and %d left notices, want 3 and 2", n, m)
	}
	// A validation rule on the segment reads it live: the request's own
	// geopoint decides.
	v := a.Voucher("TRIANGLE", stacktest.PercentOff(10))
	rule := a.OK("POST", "/v1/validation-rules", map[string]any{"name": "triangle", "type": "advanced",
		"rules": map[string]any{"1": map[string]any{"name": "customer.segment", "conditions": map[string]any{"$is": []any{seg}}}, "logic": "1"}})
	a.OK("POST", "/v1/validation-rules/"+rule["id"].(string)+"/assignments", map[string]any{"related_object_type": "voucher", "related_object_id": v["id"]})
	for at, want := range map[string]bool{inside: true, boxOnly: false, hole: false} {
		r := a.OK("POST", "/v1/validations", map[string]any{"redeemables": []any{map[string]any{"object": "voucher", "id": "TRIANGLE"}},
			"order": stacktest.Order([2]int{5000, 1}), "customer": map[string]any{"source_id": "dee", "metadata": map[string]any{"at": at}}})
		if r["valid"] != want {
			t.Errorf("a customer at %s: valid %v, want %v", at, r["valid"], want)
		}
	}
}

// A location redrawn or deleted moves the members of the segments whose
// filters name it, with their notices, though no customer changed: those
// the new shape holds enter, those it lost leave; a deleted location holds
// nobody.
func TestARedrawnLocationMovesItsSegmentsMembers(t *testing.T) {
	t.Parallel()
	a := stacktest.NewAPI(t)
	hooks := a.Subscribe("customer.segment.entered", "customer.segment.left")
	circle := func(center string) map[string]any {
		return map[string]any{"type": "circle", "distance": map[string]any{"center": center, "radius": "5 km"}}
	}
	const berlin, warsaw = "geo:52.52,13.405", "geo:52.2297,21.0122"
	loc := a.OK("POST", "/v1/locations", map[string]any{"name": "Store", "shape": circle(berlin)})["id"].(string)
	ann := a.OK("POST", "/v1/customers", map[string]any{"source_id": "ann", "metadata": map[string]any{"at": berlin}})["id"].(string)
	bob := a.OK("POST", "/v1/customers", map[string]any{"source_id": "bob", "metadata": map[string]any{"at": warsaw}})["id"].(string)
	seg := a.OK("POST", "/v1/segments", map[string]any{"name": "Near the store", "type": "auto-update",
		"filter": map[string]any{"metadata.at": map[string]any{"conditions": map[string]any{"$in_location": []any{loc}}}}})["id"].(string)
	waitMembers(a, seg, ann)
	hooks.Wait(t, "customer.segment.entered", 1)

	a.OK("PUT", "/v1/locations/"+loc, map[string]any{"shape": circle(warsaw)}) // the store moves
	if ev := hooks.Wait(t, "customer.segment.left", 1); ev["customer"].(map[string]any)["id"] != ann {
		t.Fatalf("left: %v", ev)
	}
	if ev := hooks.Wait(t, "customer.segment.entered", 2); ev["customer"].(map[string]any)["id"] != bob {
		t.Fatalf("entered: %v", ev)
	}
	waitMembers(a, seg, bob)

	if r := a.Do("DELETE", "/v1/locations/"+loc, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if ev := hooks.Wait(t, "customer.segment.left", 2); ev["customer"].(map[string]any)["id"] != bob {
		t.Fatalf("left: %v", ev)
	}
	waitMembers(a, seg)
}
