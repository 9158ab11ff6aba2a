// Package webhooks turns the notices that writes raise (a Notice: the
// project, the event type subscribed to, the object) into signed webhook
// deliveries. Emit writes a notice into the outbox in the writer's
// transaction; a fan-out task creates one delivery per subscribed, active
// webhook; each delivery is POSTed (signed with X-Voucherify-Signature and
// the Standard Webhooks headers) and retried with backoff for up to three
// days, every attempt recorded. Deleting or deactivating a webhook stops its
// pending deliveries.
//
// The packages that raise notices each declare the Notifier they call; the
// word "events" is left to custom events (package events), though the
// payload keeps the interface's names (its "event" object, event_type).
package webhooks
