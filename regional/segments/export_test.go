package segments

// The tests' first evaluations run in chunks of 7 customers, so that a
// segment over a few dozen takes several, each resuming after the last.
func init() { syncChunk = 7 }
