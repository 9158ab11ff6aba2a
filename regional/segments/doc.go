// Package segments serves customer segments: static ones (a frozen list of
// customers) and filter ones, auto-update (raising customer.segment.entered
// and customer.segment.left) and passive (silent), whose filter is the
// interface's filter language (internal/targeting) over customers.
//
// Membership is stored (segment_members) and kept in the asynchronous
// phase: a new filter segment is evaluated over every customer by a job, a
// chunk of customers a transaction, set-based; a customer's write queues a
// task that evaluates that customer against every filter segment of the
// project. The customers list's segment_id and a customer's segments read
// it; validation rules read it plus a live evaluation of the filters on
// the request's customer (Of).
package segments
