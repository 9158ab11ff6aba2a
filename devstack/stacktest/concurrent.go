package stacktest

import (
	"encoding/json"
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
// status, error key and time. A request answered 503 project_over_share
// (refused before any work: the project's requests outlasted its bounded
// wait for a database connection, as dozens on one hot row can on a busy
// machine) is sent again after a second, up to five times, as the SDKs
// do; its time counts every try.
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
			for try := 0; overShare(r) && try < 5; try++ {
				time.Sleep(time.Second)
				r = req()
			}
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

// overShare is a 503 project_over_share.
func overShare(r Resp) bool {
	if r.Status != 503 {
		return false
	}
	var e struct{ Key string }
	return json.Unmarshal(r.Body, &e) == nil && e.Key == "project_over_share"
}

// Within runs f and says whether it returned within d: what a test of a
// request that must wait (on a lock, a queue) or must not asks. f keeps
// running otherwise; done is closed when it returns.
func Within(d time.Duration, f func()) (ok bool, done chan struct{}) {
	done = make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return true, done
	case <-time.After(d):
		return false, done
	}
}
