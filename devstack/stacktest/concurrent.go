package stacktest

import (
	"sync"
	"time"
)

// Answer is one request's answer as Concurrently reads it: its status,
// error key and body (when it has one) and how long it took.
type Answer struct {
	Status  int
	Key     string
	Body    map[string]any
	Elapsed time.Duration
}

// Concurrently runs every request of reqs at once and answers each one's
// status, error key and time.
func Concurrently(a API, reqs []func() Resp) []Answer {
	out := make([]Answer, len(reqs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			r := req()
			out[i] = Answer{Status: r.Status, Elapsed: time.Since(t0)}
			if len(r.Body) > 0 {
				out[i].Body = r.JSON(a.T)
				out[i].Key, _ = out[i].Body["key"].(string)
			}
		}()
	}
	close(start)
	wg.Wait()
	return out
}
