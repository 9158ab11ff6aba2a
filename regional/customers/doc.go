// Package customers is the customer resource of the application API:
// create-or-update by source_id, read by id or source_id, keyset-paginated
// listing, update and delete, in the reference shapes, and permanent
// deletion (erase.go): every package holding the customer's personal data
// erases it through the Eraser it gives NewService, and a tombstone keeps
// the id from being read or written again.
//
// Referrals and customers need each other: a referral program reads and
// writes its referrers and referees through the Service, and a customer's
// answer carries their referrals summary. Only the answer needs referrals,
// so the Service takes nothing from them and is built first; the handler
// is given the summary (Referrals) by Register, after referrals are built.
package customers
