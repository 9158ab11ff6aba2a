// Package customers is the customer resource of the application API:
// create-or-update by source_id, read by id or source_id, keyset-paginated
// listing, update and delete, in the reference shapes.
package customers
