// Package webhooks turns the events that writes emit into signed webhook
// deliveries. Emit writes an event into the outbox in the writer's
// transaction; a fan-out task creates one delivery per subscribed, active
// webhook; each delivery is POSTed (signed with X-Voucherify-Signature and
// the Standard Webhooks headers) and retried with backoff for up to three
// days, every attempt recorded. Deleting or deactivating a webhook stops its
// pending deliveries.
package webhooks
