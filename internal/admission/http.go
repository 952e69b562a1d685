package admission

import (
	"io"
	"net/http"
	"strings"
)

// maxBody bounds what the webhook reads: a pod AdmissionReview is a few KiB;
// anything near this size is not one.
const maxBody = 3 << 20

// ServeHTTP lets the same handler run behind a plain HTTPS server (the local
// demo registers it with a real kube-apiserver).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	headers := make(map[string]string, len(r.Header))
	for k, v := range r.Header {
		if len(v) > 0 {
			headers[strings.ToLower(k)] = v[0]
		}
	}
	resp := h.Serve(r.Context(), Request{Method: r.Method, Path: r.URL.Path, Headers: headers, Body: body})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}
