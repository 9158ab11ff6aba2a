package stacktest

// CarriedRule makes in a's project one object of each kind a campaign
// template's copy carries to another project (a location "Berlin", a
// product "hat", an auto-update collection of red things, an auto-update
// segment of customers in Berlin) and an advanced validation rule named
// name that needs all four. It answers the rule and the objects' ids by
// the kind created_resources names them with.
func (a API) CarriedRule(name string) (rule map[string]any, ids map[string]string) {
	a.T.Helper()
	berlin := map[string]any{"type": "circle", "format": "distance", "distance": map[string]any{"center": "geo:52.52,13.405", "radius": "5 km"}}
	loc := a.OK("POST", "/v1/locations", map[string]any{"name": "Berlin", "shape": berlin})["id"].(string)
	hat := a.OK("POST", "/v1/products", map[string]any{"source_id": "hat", "name": "Hat", "price": 2000,
		"metadata": map[string]any{"colour": "red"}})["id"].(string)
	coll := a.OK("POST", "/v1/product-collections", map[string]any{"name": "Red things", "type": "AUTO_UPDATE",
		"filter": map[string]any{"junction": "and", "metadata.colour": map[string]any{"conditions": map[string]any{"$is": []any{"red"}}}}})["id"].(string)
	seg := a.OK("POST", "/v1/segments", map[string]any{"name": "Berliners", "type": "auto-update",
		"filter": map[string]any{"metadata.at": map[string]any{"conditions": map[string]any{"$in_location": []any{loc}}}}})["id"].(string)
	rule = a.OK("POST", "/v1/validation-rules", map[string]any{"name": name, "type": "advanced",
		"rules": map[string]any{
			"1":     map[string]any{"name": "order.items.any", "conditions": map[string]any{"$is": []any{map[string]any{"object": "product", "id": hat}}}},
			"2":     map[string]any{"name": "order.items.any", "conditions": map[string]any{"$is": []any{map[string]any{"object": "products_collection", "id": coll}}}},
			"3":     map[string]any{"name": "customer.segment", "conditions": map[string]any{"$is": []any{seg}}},
			"4":     map[string]any{"name": "order.metadata", "property": "store", "conditions": map[string]any{"$in_location": []any{loc}}},
			"logic": "1 and 2 and 3 and 4"}})
	return rule, map[string]string{"location": loc, "product": hat, "products_collection": coll, "segment": seg}
}
