package provisioning

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/store"
)

// Store is what the provisioner needs of internal/store (*store.Store).
type Store interface {
	AcquireLease(ctx context.Context, name, holder string, d time.Duration) (*store.Lease, error)
	RenewLease(ctx context.Context, l *store.Lease, d time.Duration) error
	ReleaseLease(ctx context.Context, l *store.Lease) error
	GetKV(ctx context.Context, k string) (*store.KV, error)
	PutKV(ctx context.Context, k string, value []byte, expectedVersion int64, ttl time.Duration) (int64, error)
	ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error)
	CreateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error
	GetNodeClaim(ctx context.Context, name string) (*apis.NodeClaim, error)
	MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error)
	// UpdateNodeClaim writes nc while the stored claim is still at nc's
	// version (store.ErrConflict otherwise).
	UpdateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error
	DeleteNodeClaim(ctx context.Context, nc *apis.NodeClaim) error
}

// Cluster is what the provisioner needs of the API server (*kube.Client).
type Cluster interface {
	Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error)
	PodEvent(ctx context.Context, p *corev1.Pod, eventType, reason, format string, args ...any) error
}

// Launcher creates a claim's instance (*aws.Provider). Launch must be
// idempotent per claim name: a second call for a claim whose instance
// exists returns that instance.
type Launcher interface {
	Launch(ctx context.Context, req nwaws.LaunchRequest) (nwaws.Instance, error)
}

// Deps are the provisioner's adapters and settings.
type Deps struct {
	Store    Store
	Cluster  Cluster
	Launcher Launcher
	// Catalog returns the region's instance types with current prices.
	Catalog func(ctx context.Context) (*catalog.Catalog, error)
	// Unavailable returns the current ICE set (offerings to avoid).
	Unavailable func(ctx context.Context) (map[scheduling.OfferingKey]bool, error)
	// Requeue, when set, asks the lifecycle to look at a claim after a delay
	// (registration follows a launch within a minute or two).
	Requeue func(ctx context.Context, msg queue.Message, delay time.Duration) error
	// RequeueBatch, when set, sends a round's launch requeues together
	// (queue.Queue.SendBatch); without it they go one by one via Requeue.
	RequeueBatch func(ctx context.Context, msgs []queue.Message, delay time.Duration) error
	// Nudge, when set, sends to the provision queue: a throttled run asks
	// for another after a backoff. Without it the schedule's tick retries.
	Nudge   func(ctx context.Context, msg queue.Message, delay time.Duration) error
	Config  *apis.Config
	Metrics *metrics.Recorder
	Log     *slog.Logger
	Now     func() time.Time
	// Sleep waits d or until ctx ends (tests drive batching with it).
	Sleep    func(ctx context.Context, d time.Duration) error
	Settings Settings
}

// Settings tune the provisioner.
type Settings struct {
	// Policy is the planning policy (Karpenter's MIN_VALUES_POLICY and
	// PREFERENCE_POLICY; zero: Strict, Respect).
	Policy scheduling.Policy
	// BatchIdle closes the batching window once no new pending pod appeared
	// for this long (default 1 s); BatchMax bounds the window (default 10 s).
	BatchIdle time.Duration
	BatchMax  time.Duration
	// BatchPoll is how often pending pods are re-listed while batching
	// (default BatchIdle/10, so the window closes at most a tenth late).
	BatchPoll time.Duration
	// LeaseDuration is how long the provisioner lease lasts between renewals
	// (default 1 minute; renewed every third of it while a run lasts).
	LeaseDuration time.Duration
	// LaunchConcurrency bounds concurrent claim launches (default 32).
	LaunchConcurrency int
	// LaunchAttempts bounds attempts per claim for errors other than
	// capacity (default 3).
	LaunchAttempts int
	// MaxRounds bounds re-planning after capacity errors in one run (default 3).
	MaxRounds int
	// MaxPodEvents caps the pod events one run emits (default 1000); the
	// rest are counted in the run's log line.
	MaxPodEvents int
	// NominationEventBurst and NominationEventRate rate-limit the Nominated
	// events of a run as Karpenter does (a token bucket: default 10, then
	// 5 a second); a negative rate writes one per nomination (up to
	// MaxPodEvents), as shadow mode needs: it learns each claim's pods from
	// them.
	NominationEventBurst int
	NominationEventRate  float64
	// RegistrationCheck is the delay of the lifecycle requeue after a launch
	// (default 30 s).
	RegistrationCheck time.Duration
	// ThrottleBackoff and MaxThrottleBackoff bound the delay of the nudge a
	// throttled run sends (default 5 s and 1 minute); within them the delay
	// is the age of the youngest throttled claim, so a claim throttled run
	// after run waits about twice as long each time.
	ThrottleBackoff    time.Duration
	MaxThrottleBackoff time.Duration
	// LeaseHeldDelay is how long a nudge that found the lease held waits
	// before it comes back (default 5 s: a pass takes seconds).
	LeaseHeldDelay time.Duration
}

func (s *Settings) defaults() {
	basedeps.Default(&s.BatchIdle, time.Second)
	basedeps.Default(&s.BatchMax, 10*time.Second)
	if s.BatchMax < s.BatchIdle {
		s.BatchMax = s.BatchIdle
	}
	basedeps.Default(&s.BatchPoll, s.BatchIdle/10)
	basedeps.Default(&s.LeaseDuration, time.Minute)
	basedeps.Default(&s.LaunchConcurrency, 32)
	basedeps.Default(&s.LaunchAttempts, 3)
	basedeps.Default(&s.MaxRounds, 3)
	basedeps.Default(&s.MaxPodEvents, 1000)
	basedeps.Default(&s.NominationEventBurst, 10)
	if s.NominationEventRate == 0 {
		s.NominationEventRate = 5
	}
	basedeps.Default(&s.RegistrationCheck, 30*time.Second)
	basedeps.Default(&s.ThrottleBackoff, 5*time.Second)
	basedeps.Default(&s.MaxThrottleBackoff, time.Minute)
	basedeps.Default(&s.LeaseHeldDelay, 5*time.Second)
	if s.MaxThrottleBackoff < s.ThrottleBackoff {
		s.MaxThrottleBackoff = s.ThrottleBackoff
	}
}
