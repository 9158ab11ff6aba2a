package router

import (
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/tallyhq/tally/internal/apierr"
)

// Export files. GET /v1/exports/{id} is the export object as JSON on an
// API host and its file on a download host (download.<domain>,
// us1.download…). The file is also served on an API host when the request
// carries the link's token or asks for CSV, since the generated SDK
// downloads from the host it was configured with. The file's route on the
// regional service is /v1/exports/{id}/download.

const exportsPrefix = "/v1/exports/"

// exportOf returns the export a GET or HEAD of /v1/exports/{id} names.
func exportOf(req *http.Request) (string, bool) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return "", false
	}
	id, ok := strings.CutPrefix(req.URL.Path, exportsPrefix)
	if !ok || id == "" || strings.ContainsAny(id, "/%") || len(id) > 64 {
		return "", false
	}
	return id, true
}

// wantsFile reports whether a request for an export on an API host is for
// its file: it carries a token or prefers CSV or plain text to JSON.
func wantsFile(req *http.Request) bool {
	if req.URL.Query().Get("token") != "" {
		return true
	}
	for _, v := range strings.Split(req.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(v))
		if err != nil {
			continue
		}
		switch mt {
		case "text/csv", "text/plain":
			return true
		case "application/json", "*/*", "application/*":
			return false
		}
	}
	return false
}

// toFile points the request at the regional route of the export's file.
func toFile(req *http.Request, id string) {
	req.URL.Path = exportsPrefix + id + "/download"
	req.URL.RawPath = ""
}

func notOnDownloadHost(req *http.Request) error {
	return &apierr.Error{Status: http.StatusNotFound, Key: "not_found", Message: "Resource not found",
		Details: "A download host serves export files only: GET /v1/exports/{id}?token=…; " + req.Method + " " +
			clipPath(req.URL.Path) + " is served on the API host."}
}

func clipPath(p string) string {
	if len(p) > 80 {
		return p[:80] + "…"
	}
	return p
}

// fileWriteIdle is how long a file download may make no progress: the
// public listeners' 120 s for a whole answer would cut a large file to a
// slow client, so each write of a file moves the deadline on instead.
const fileWriteIdle = 60 * time.Second

// progressDeadline gives a file download a fresh write deadline with each
// piece written: a slow but steady client gets the whole file, a stalled
// one is still cut off.
type progressDeadline struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (p *progressDeadline) Write(b []byte) (int, error) {
	_ = p.rc.SetWriteDeadline(time.Now().Add(fileWriteIdle))
	return p.ResponseWriter.Write(b)
}

func (p *progressDeadline) Flush() { _ = p.rc.Flush() }

func (p *progressDeadline) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// streamFile lets the answer to a file request take as long as it makes
// progress; it reports whether the writer allows that.
func streamFile(w http.ResponseWriter) (http.ResponseWriter, error) {
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Now().Add(fileWriteIdle)); err != nil {
		return w, err
	}
	return &progressDeadline{ResponseWriter: w, rc: rc}, nil
}
