package exports

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/tallyhq/tally/internal/apierr"
)

// fileTypes are the media types an export's file is served as, the first
// preferred: CSV as Tally writes it, or text/plain, which the reference
// declares for the download and its Python SDK asks for (refusing any
// other answer).
var fileTypes = []string{"text/csv", "text/plain"}

// fileType negotiates the file's media type on the request's Accept
// (RFC 9110 §12.5.1): the acceptable type of the highest quality, CSV on a
// tie or when nothing is asked; ok is false when neither is acceptable.
func fileType(accept []string) (mt string, ok bool) {
	if len(accept) == 0 {
		return fileTypes[0], true
	}
	best, bestQ := "", 0.0
	for _, t := range fileTypes {
		if q := quality(accept, t); q > bestQ {
			best, bestQ = t, q
		}
	}
	return best, best != ""
}

// quality is the q Accept gives t through its most specific range (t
// itself, text/*, then */*); 0 when no range covers it.
func quality(accept []string, t string) float64 {
	q, spec := 0.0, -1
	for _, v := range accept {
		for _, r := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(r))
			if err != nil {
				continue
			}
			s := -1
			switch mt {
			case t:
				s = 2
			case "text/*":
				s = 1
			case "*/*":
				s = 0
			}
			if s <= spec {
				continue
			}
			rq := 1.0
			if v, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
					rq = f
				}
			}
			q, spec = rq, s
		}
	}
	return q
}

// notAcceptable is the 406 for an Accept that neither file type meets.
func notAcceptable(accept []string) error {
	return &apierr.Error{Status: http.StatusNotAcceptable, Key: "not_acceptable", Message: "Not acceptable",
		Details: "An export's file is served as text/csv or text/plain; the request's Accept (" +
			clip(strings.Join(accept, ", ")) + ") takes neither."}
}
