// Package async is the asynchronous phase of request processing: the
// transactional outbox that writes follow-up work in the request's own
// transaction, the workers that claim it (FOR UPDATE SKIP LOCKED, with a
// lease), run it, retry it with backoff and park it after too many failures,
// and the async actions through which long jobs show their progress.
package async
