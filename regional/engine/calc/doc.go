// Package calc is the promotion engine's order recalculation: redeemables
// applied to an order in turn, each to what the ones before it left, with
// each one's effect and the order rendered as the reference's
// OrderCalculated. It knows discounts, gift credits and loyalty cards
// paying with a reward, not where they come from: regional/engine hands it
// what its validations and redemptions judged, and
// regional/qualifications reads its effects through the engine. It reads
// nothing but a product's price in the catalogue.
package calc
