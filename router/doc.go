// Package router is the edge of the platform. For every request it resolves
// the cluster from the host name and the project from the credentials (both
// through the tenancy resolver's caches), refuses what is wrong with the
// interface's JSON errors, and forwards the rest to the cluster's regional
// instance, or to management, with a signed identity header and W3C trace
// context. It holds no state of its own: run any number of replicas.
//
// A request goes through a chain of steps (chain.go, step_*.go), in the
// order New writes down once.
package router
