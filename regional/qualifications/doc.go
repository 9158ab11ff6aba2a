// Package qualifications serves POST /v1/qualifications (and, through the
// client-side API's twin, /client/v1/qualifications): which of a
// customer's vouchers and loyalty cards and of the project's promotion
// tiers and stacks the customer and order qualify for, each with its effect
// on the order alone.
//
// It finds the candidates itself (the wallet by holder, the active tiers
// from a catalogue at most CatalogueTTL old) and has regional/engine judge
// them and compute their effects exactly as a validation does, so that
// what a qualification offers validates as it says; the engine knows
// nothing of qualifications. What is its own: the scenarios, the filters
// of options.filters, the sorting and paging, and the expansions.
package qualifications
