package admission

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// SecretHeader carries the shared secret when it is not in the URL path.
const SecretHeader = "X-Nodewright-Secret"

// Nudger wakes the provisioner. Implementations must be safe for concurrent use.
type Nudger interface {
	Nudge(ctx context.Context, hint Hint, delay time.Duration) error
}

// Request is an HTTP request as a Lambda function URL or an API Gateway HTTP
// API (payload 2.0) delivers it, reduced to what the webhook reads.
type Request struct {
	Method  string
	Path    string
	Headers map[string]string // lower-cased names
	Body    []byte
}

// Response is the HTTP answer.
type Response struct {
	Status int
	Body   []byte
}

// Handler answers AdmissionReviews. It always allows; when a request says a
// pod needs capacity it nudges the provisioner, at most once per Coalesce
// window per warm instance, so a burst of calls causes a handful of
// provisioner runs rather than one per pod.
type Handler struct {
	secrets  *secretCache
	nudger   Nudger
	coalesce time.Duration
	// createDelay postpones nudges from the CREATE fallback: a just-created
	// pod is not yet known to be unschedulable, so the provisioner should look
	// after the scheduler had its chance.
	createDelay time.Duration
	now         func() time.Time
	log         *slog.Logger

	mu         sync.Mutex
	lastNudge  time.Time
	suppressed int
}

// Options configures a Handler.
type Options struct {
	// Secret is a fixed shared secret; Secrets, when set, is read instead
	// and re-read so a rotation needs no cold start.
	Secret      string
	Secrets     SecretSource
	Nudger      Nudger
	Coalesce    time.Duration // default 1s, the provisioner's idle window
	CreateDelay time.Duration // default 5s
	Now         func() time.Time
	Logger      *slog.Logger
}

// NewHandler builds a Handler. An empty secret is refused: an open webhook
// would let anyone trigger provisioner runs.
func NewHandler(o Options) (*Handler, error) {
	if o.Secrets == nil {
		if NormalizeSecret(o.Secret) == "" {
			return nil, errEmptySecret
		}
		o.Secrets = StaticSecret(o.Secret)
	}
	if o.Nudger == nil {
		return nil, errNoNudger
	}
	if o.Coalesce <= 0 {
		o.Coalesce = time.Second
	}
	if o.CreateDelay <= 0 {
		o.CreateDelay = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Handler{secrets: &secretCache{source: o.Secrets, now: o.Now}, nudger: o.Nudger, coalesce: o.Coalesce,
		createDelay: o.CreateDelay, now: o.Now, log: o.Logger}, nil
}

// Serve handles one request. It never returns an error: the apiserver treats
// any non-2xx as a webhook failure and, with failurePolicy Ignore, lets the
// pod operation through.
func (h *Handler) Serve(ctx context.Context, req Request) Response {
	if !h.authenticated(ctx, req) {
		h.log.WarnContext(ctx, "webhook request rejected", "reason", "unauthenticated", "path", redactPath(req.Path))
		return Response{Status: http.StatusUnauthorized, Body: []byte(`{"error":"unauthenticated"}`)}
	}
	if req.Method != "" && req.Method != http.MethodPost {
		return Response{Status: http.StatusMethodNotAllowed, Body: []byte(`{"error":"POST only"}`)}
	}
	rev, err := decodeReview(req.Body)
	if err != nil {
		h.log.WarnContext(ctx, "webhook request rejected", "reason", "malformed", "error", err.Error())
		return Response{Status: http.StatusBadRequest, Body: []byte(`{"error":"malformed AdmissionReview"}`)}
	}
	if hint, ok := hintFor(rev.Request); ok {
		h.maybeNudge(ctx, hint)
	}
	return Response{Status: http.StatusOK, Body: allowed(rev.Request.UID)}
}

func (h *Handler) maybeNudge(ctx context.Context, hint Hint) {
	now := h.now()
	h.mu.Lock()
	if !h.lastNudge.IsZero() && now.Sub(h.lastNudge) < h.coalesce {
		h.suppressed++
		h.mu.Unlock()
		return
	}
	h.lastNudge = now
	coalesced := h.suppressed
	h.suppressed = 0
	h.mu.Unlock()

	delay := time.Duration(0)
	if hint.Reason == "Created" {
		delay = h.createDelay
	}
	if err := h.nudger.Nudge(ctx, hint, delay); err != nil {
		// The 1-minute schedule still provisions; forget this nudge so the
		// next pod retries it instead of waiting a full window.
		h.mu.Lock()
		h.lastNudge = time.Time{}
		h.mu.Unlock()
		h.log.ErrorContext(ctx, "nudge provisioner", "error", err.Error(), "pod", hint.Namespace+"/"+hint.Name)
		return
	}
	h.log.InfoContext(ctx, "nudged provisioner", "pod", hint.Namespace+"/"+hint.Name, "reason", hint.Reason, "coalesced", coalesced)
}

// authenticated accepts the secret as the last path segment (as written by
// SecretPathSegment, escaped or not, depending on how the front end hands
// over the path) or in SecretHeader.
func (h *Handler) authenticated(ctx context.Context, req Request) bool {
	var candidates []string
	if v := req.Headers[strings.ToLower(SecretHeader)]; v != "" {
		candidates = append(candidates, NormalizeSecret(v))
	} else {
		path := strings.TrimRight(req.Path, "/")
		seg := path[strings.LastIndexByte(path, '/')+1:]
		candidates = append(candidates, seg)
		if un, err := url.PathUnescape(seg); err == nil && un != seg {
			candidates = append(candidates, NormalizeSecret(un))
		}
	}
	ok, err := h.secrets.matches(ctx, candidates)
	if err != nil {
		h.log.ErrorContext(ctx, "read webhook secret", "error", err.Error())
	}
	return ok
}

// redactPath drops the last path segment, which may be the secret.
func redactPath(p string) string {
	if i := strings.LastIndexByte(strings.TrimRight(p, "/"), '/'); i >= 0 {
		return p[:i+1] + "<redacted>"
	}
	return "<redacted>"
}
