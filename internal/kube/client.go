package kube

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Default client sizing: a provisioner pass lists tens of thousands of pods
// and a drain evicts hundreds of pods; client-go's 5 QPS / 10 burst default
// would make either take minutes.
const (
	DefaultQPS   = 200
	DefaultBurst = 400
	// DefaultTimeout bounds one HTTP request (a list page, a patch).
	DefaultTimeout = 60 * time.Second
	// Component is the event source and field manager name.
	Component = "nodewright"
)

// ClusterDescriber is the EKS API call the client needs; *eks.Client
// satisfies it.
type ClusterDescriber interface {
	DescribeCluster(ctx context.Context, in *eks.DescribeClusterInput, optFns ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// ClusterEndpoint is what connecting to a cluster takes.
type ClusterEndpoint struct {
	Name     string
	Endpoint string // https URL of the API server
	CAData   []byte // PEM
}

// DescribeEndpoint reads a cluster's API server endpoint and CA from EKS.
func DescribeEndpoint(ctx context.Context, api ClusterDescriber, clusterName string) (ClusterEndpoint, error) {
	out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(clusterName)})
	if err != nil {
		return ClusterEndpoint{}, fmt.Errorf("describe eks cluster %s: %w", clusterName, err)
	}
	c := out.Cluster
	if c == nil || aws.ToString(c.Endpoint) == "" {
		status := "unknown"
		if c != nil {
			status = string(c.Status)
		}
		return ClusterEndpoint{}, fmt.Errorf("eks cluster %s has no endpoint yet (status %s)", clusterName, status)
	}
	if c.CertificateAuthority == nil || aws.ToString(c.CertificateAuthority.Data) == "" {
		return ClusterEndpoint{}, fmt.Errorf("eks cluster %s has no certificate authority data", clusterName)
	}
	// EKS returns the PEM base64-encoded once more.
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(c.CertificateAuthority.Data))
	if err != nil {
		return ClusterEndpoint{}, fmt.Errorf("eks cluster %s: certificate authority data is not base64: %w", clusterName, err)
	}
	return ClusterEndpoint{Name: clusterName, Endpoint: aws.ToString(c.Endpoint), CAData: ca}, nil
}

// Options size and identify a client.
type Options struct {
	QPS     float32       // default DefaultQPS
	Burst   int           // default DefaultBurst
	Timeout time.Duration // per request; default DefaultTimeout
	// UserAgent defaults to "nodewright".
	UserAgent string
}

func (o Options) withDefaults() Options {
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.UserAgent == "" {
		o.UserAgent = Component
	}
	return o
}

// RESTConfig builds a client configuration for an EKS endpoint that
// authenticates every request with a token from ts. Responses are requested
// as protobuf (smaller and cheaper to decode than JSON) with JSON fallback.
func RESTConfig(ep ClusterEndpoint, ts *TokenSource, o Options) (*rest.Config, error) {
	if ep.Endpoint == "" {
		return nil, errors.New("kube rest config: empty endpoint")
	}
	if ts == nil {
		return nil, errors.New("kube rest config: nil token source")
	}
	o = o.withDefaults()
	cfg := &rest.Config{
		Host:            ep.Endpoint,
		TLSClientConfig: rest.TLSClientConfig{CAData: ep.CAData},
		QPS:             o.QPS,
		Burst:           o.Burst,
		Timeout:         o.Timeout,
		UserAgent:       o.UserAgent,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return &bearerTransport{ts: ts, base: rt}
		},
	}
	preferProtobuf(cfg)
	return cfg, nil
}

// preferProtobuf asks for protobuf (every built-in type has it; decoding is
// several times cheaper than JSON) and accepts JSON from servers without it.
func preferProtobuf(cfg *rest.Config) {
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
}

// ForEKS connects to an EKS cluster: DescribeCluster for endpoint and CA, an
// STS token source from awsCfg, and a Client sized by o.
func ForEKS(ctx context.Context, awsCfg aws.Config, eksAPI ClusterDescriber, clusterName string, o Options, logger *slog.Logger) (*Client, error) {
	ep, err := DescribeEndpoint(ctx, eksAPI, clusterName)
	if err != nil {
		return nil, err
	}
	ts, err := NewTokenSource(awsCfg, clusterName)
	if err != nil {
		return nil, err
	}
	cfg, err := RESTConfig(ep, ts, o)
	if err != nil {
		return nil, err
	}
	return NewClient(cfg, logger)
}

// Client wraps a clientset with nodewright's operations.
type Client struct {
	cs     kubernetes.Interface
	logger *slog.Logger
	now    func() time.Time
	// reuse keeps the last cached snapshot's bound pods between passes.
	reuse *podReuse
	// fullLists turns every snapshot into fresh full lists (FullLists).
	fullLists *atomic.Bool
}

// FullLists makes every snapshot list everything fresh from etcd, ignoring
// SnapshotOptions.Cached: the approach before cached snapshots, kept to
// measure against (internal/localcloud/scaletest) and as a way back.
func (c *Client) FullLists(on bool) { c.fullLists.Store(on) }

// NewClient builds a Client from a rest.Config (RESTConfig's, or a test
// harness's admin configuration).
func NewClient(cfg *rest.Config, logger *slog.Logger) (*Client, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	return NewClientFromClientset(cs, logger), nil
}

// NewClientFromClientset wraps an existing clientset.
func NewClientFromClientset(cs kubernetes.Interface, logger *slog.Logger) *Client {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Client{cs: cs, logger: logger, now: time.Now, reuse: &podReuse{}, fullLists: &atomic.Bool{}}
}

// Clientset exposes the underlying clientset for calls this package does not wrap.
func (c *Client) Clientset() kubernetes.Interface { return c.cs }
