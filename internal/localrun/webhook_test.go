package localrun

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The webhook endpoint serves TLS that verifies against the CA put in the
// configuration's caBundle, for 127.0.0.1, and passes requests through.
func TestWebhookServerTLS(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/s3cret") {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	ws, err := startWebhook(h, "s3cret", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ws.caPEM) {
		t.Fatal("caBundle is not PEM")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	resp, err := client.Post(ws.url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("TLS with the generated CA: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	n, first, last := ws.stats(time.Now())
	if n != 1 || first.IsZero() || last != first {
		t.Fatalf("stats %d %v %v", n, first, last)
	}
}
