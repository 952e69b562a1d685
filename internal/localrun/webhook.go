package localrun

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/admission"
)

// webhookServer is the local stand-in for the webhook function URL: an
// HTTPS server on 127.0.0.1 with a certificate from a CA generated for this
// run, serving internal/admission's handler with the secret as the last
// path segment, as the registrar configures it in AWS.
type webhookServer struct {
	srv    *http.Server
	ln     net.Listener
	url    string // including the secret
	caPEM  []byte
	mu     sync.Mutex
	times  []time.Time // arrival of every AdmissionReview
	onCall func(n int)
}

func startWebhook(h http.Handler, secret string, onCall func(n int)) (*webhookServer, error) {
	caPEM, cert, err := selfSignedServing()
	if err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook listener: %w", err)
	}
	w := &webhookServer{ln: ln, caPEM: caPEM, onCall: onCall,
		url: fmt.Sprintf("https://%s/admit/%s", ln.Addr(), url.PathEscape(secret))}
	w.srv = &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			w.mu.Lock()
			w.times = append(w.times, time.Now())
			n := len(w.times)
			w.mu.Unlock()
			h.ServeHTTP(rw, r)
			if w.onCall != nil {
				w.onCall(n)
			}
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = w.srv.ServeTLS(ln, "", "") }()
	return w, nil
}

// stats returns the number of AdmissionReviews served, when the first
// arrived and when the last one before t arrived.
func (w *webhookServer) stats(t time.Time) (n int, first, lastBefore time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.times) == 0 {
		return 0, time.Time{}, time.Time{}
	}
	for _, at := range w.times {
		if at.Before(t) {
			lastBefore = at
		}
	}
	return len(w.times), w.times[0], lastBefore
}

func (w *webhookServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return w.srv.Shutdown(ctx)
}

// registerWebhook installs the ValidatingWebhookConfiguration the CDK
// stack's registrar installs in a real cluster, pointing at the local
// endpoint.
func registerWebhook(ctx context.Context, cs kubernetes.Interface, webhookName, endpoint string, caPEM []byte) error {
	cfg := admission.WebhookConfiguration(webhookName, map[string]string{"app.kubernetes.io/managed-by": webhookName}, endpoint, caPEM)
	api := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	_, err := api.Create(ctx, cfg, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *admissionv1.ValidatingWebhookConfiguration
		if cur, err = api.Get(ctx, webhookName, metav1.GetOptions{}); err == nil {
			cfg.ResourceVersion = cur.ResourceVersion
			_, err = api.Update(ctx, cfg, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("register ValidatingWebhookConfiguration %s: %w", webhookName, err)
	}
	return nil
}
