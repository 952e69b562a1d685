package admission

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/nodewright/nodewright/internal/eventsamples"
)

// FuzzServe sends arbitrary requests to the webhook. Properties: no panic;
// the answer is 200 with an allowing AdmissionReview for the request's UID,
// or 400/401/405 with a JSON error; a request without the secret never
// nudges; a well-formed review with the secret is always allowed.
//
//	go test -run '^$' -fuzz '^FuzzServe$' -fuzztime 60s ./internal/admission
func FuzzServe(f *testing.F) {
	review := eventsamples.Read(f, "admission-review-pods-status-unschedulable.json")
	f.Add("POST", "/admit/s3cret", "", review)
	f.Add("POST", "/admit/wrong", "", review)
	f.Add("POST", "/admit/", "s3cret", review)
	f.Add("GET", "/admit/s3cret", "", []byte(`{}`))
	f.Add("POST", "/admit/s3cret", "", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}`))
	f.Add("POST", "/admit/%73%33cret", "", []byte(`not json`))
	f.Fuzz(func(t *testing.T, method, path, header string, body []byte) {
		n := &recordingNudger{}
		h, err := NewHandler(Options{Secret: "s3cret", Nudger: n, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		headers := map[string]string{}
		if header != "" {
			headers["x-nodewright-secret"] = header
		}
		resp := h.Serve(t.Context(), Request{Method: method, Path: path, Headers: headers, Body: body})
		var out struct {
			Response *struct {
				UID     string `json:"uid"`
				Allowed bool   `json:"allowed"`
			} `json:"response"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(resp.Body, &out); err != nil {
			t.Fatalf("answer is not JSON: %q", resp.Body)
		}
		switch resp.Status {
		case http.StatusOK:
			rev, err := decodeReview(body)
			if err != nil || out.Response == nil || !out.Response.Allowed || out.Response.UID != rev.Request.UID {
				t.Fatalf("200 without allowing the request's review: %s (decode: %v)", resp.Body, err)
			}
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusMethodNotAllowed:
			if out.Error == "" {
				t.Fatalf("%d without an error: %s", resp.Status, resp.Body)
			}
			if resp.Status == http.StatusUnauthorized && n.count() != 0 {
				t.Fatal("an unauthenticated request nudged the provisioner")
			}
		default:
			t.Fatalf("status %d", resp.Status)
		}
		if _, err := decodeReview(body); err == nil && method == http.MethodPost && (header == "s3cret" || header == "" && path == "/admit/s3cret") &&
			resp.Status != http.StatusOK {
			t.Fatalf("authenticated, well-formed review answered %d", resp.Status)
		}
	})
}
