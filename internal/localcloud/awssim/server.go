package awssim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim/wire"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/eventsim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/kubelet"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/sqssim"
)

// Default credentials the simulator accepts for presigned EKS tokens.
const (
	DefaultAccessKeyID     = "AKIALOCALCLOUD000001"
	DefaultSecretAccessKey = "localcloud/secret/key/not/a/real/one"
	DefaultAccountID       = "111122223333"
)

// DefaultPendingDelay is how long an instance stays pending unless
// Delays.Pending says otherwise.
const DefaultPendingDelay = 5 * time.Second

// Delays are durations of simulated cloud time (divided by Options.TimeScale on the wall clock).
type Delays struct {
	Pending          time.Duration // pending -> running (default 5s)
	ShuttingDown     time.Duration // shutting-down -> terminated (default 10s)
	NodeRegistration time.Duration // running -> Node registered (default 10s)
	SpotInterruption time.Duration // interruption warning -> termination (default 120s)
	// Consistency: how long a launched instance stays unknown to
	// DescribeInstances and TerminateInstances (rule launch-consistency;
	// default none; a full local cloud sets one).
	Consistency time.Duration
}

// Options configure a simulator.
type Options struct {
	Region            string // default us-west-2
	ClusterName       string // required
	KubernetesVersion string // required, e.g. "1.36"
	AccountID         string // default DefaultAccountID

	// What the region sells, first set wins: Catalog (hand-built, e.g.
	// ec2sim.DefaultCatalog), EC2Data (the project catalog's raw shapes,
	// catalog.ReadEC2Data), AWSDataDir (the ../shared/aws-data layout), else
	// the project's embedded catalog (us-east-1, us-west-2), else the small
	// ec2sim.DefaultCatalog.
	Catalog    *ec2sim.Catalog
	EC2Data    *catalog.EC2Input
	AWSDataDir string

	// AccessKeyID/SecretAccessKey are the credentials whose signatures the
	// token webhook verifies (default DefaultAccessKeyID/DefaultSecretAccessKey).
	AccessKeyID, SecretAccessKey string
	// CallerARN is the identity STS reports for those credentials
	// (default arn:aws:iam::<account>:role/nodewright).
	CallerARN string
	// Identities maps caller ARNs to Kubernetes users for the token webhook
	// (default: every ARN of the account -> itself, group system:masters).
	Identities []Identity

	// ServiceCIDR is what DescribeCluster reports as serviceIpv4Cidr
	// (default 10.0.0.0/24, the local control plane's service range).
	ServiceCIDR string

	// KeepTerminatedNodes leaves the Nodes of terminated instances in the
	// API server (NotReady) instead of deleting them like the AWS cloud
	// controller manager does.
	KeepTerminatedNodes bool
	// PodENI turns security groups for pods on (ENABLE_POD_ENI on the VPC
	// CNI): Nodes of ENI-trunking types report vpc.amazonaws.com/pod-eni
	// as the VPC resource controller advertises it (kubelet.AttachTrunk).
	PodENI bool

	// RulesOff are simulator rules to leave off (package fidelity's names);
	// NODEWRIGHT_SIM_RULES_OFF adds to them.
	RulesOff []string
	// Throttle sizes EC2's request and resource token buckets (rule
	// request-throttling); zero fields keep EC2's documented sizes.
	Throttle ec2sim.Throttle

	// MinLatency delays every response (default 1ms; see ServeHTTP).
	MinLatency time.Duration

	Seed      uint64           // seeds resource ids, for deterministic tests
	TimeScale float64          // >1 runs the cloud's delays faster (default 1)
	Now       func() time.Time // default time.Now
	Delays    Delays
	Logger    *slog.Logger
}

// Server is a running simulator.
type Server struct {
	opts   Options
	ln     net.Listener
	http   *http.Server
	ec2    *ec2sim.Cloud
	sqs    *sqssim.Service
	events *eventsim.Bus
	faults faults
	// authz evaluates requests signed as a role (AddRole) under its policies.
	authz authz
	// dynamoClient forwards DynamoDB requests to dynalite (dynamoUpstream).
	dynamoClient *http.Client
	// secrets is Secrets Manager (the webhook's shared secret).
	secrets secretStore
	// rules are the AWS rules the simulator enforces (package fidelity).
	rules fidelity.Set
	// acct is what doctor reads: IAM roles, quotas, stacks, access entries.
	acct   account
	log    callLog
	logger *slog.Logger

	mu         sync.Mutex
	principals map[string]principal
	created    time.Time
	reqSeq     uint64
	closed     bool
	timers     []*time.Timer
	eks        eksCluster
	// dynamoUpstream is dynalite's URL (SetDynamoDBUpstream).
	dynamoUpstream string
	kubelet        *kubelet.Emulator
	// kmsKeys are the account's customer managed keys, by key ID (kms.go).
	kmsKeys map[string]KMSKey
	// eventDelay, when set, delays EventBridge's deliveries
	// (DelayEventDelivery).
	eventDelay atomic.Pointer[func(targetARN string) time.Duration]
	wg         sync.WaitGroup
	stopOnce   sync.Once
	stop       chan struct{}
}

// New starts a simulator on a free loopback port.
func New(opts Options) (*Server, error) {
	if opts.ClusterName == "" || opts.KubernetesVersion == "" {
		return nil, errors.New("awssim: ClusterName and KubernetesVersion are required")
	}
	opts.defaults()
	cat, err := opts.catalog()
	if err != nil {
		return nil, err
	}
	rules, err := fidelity.Off(opts.RulesOff...)
	if err != nil {
		return nil, fmt.Errorf("awssim: %w", err)
	}
	if rules, err = rules.WithEnv(); err != nil {
		return nil, fmt.Errorf("awssim: %w", err)
	}
	d := &opts.Delays
	s := &Server{rules: rules, opts: opts, logger: opts.Logger, stop: make(chan struct{}), created: opts.Now(), dynamoClient: &http.Client{Transport: upstreamTransport()},
		principals: map[string]principal{opts.AccessKeyID: {secret: opts.SecretAccessKey, arn: opts.CallerARN}}}
	s.ec2, err = ec2sim.New(ec2sim.Config{
		Region: opts.Region, Account: opts.AccountID, ClusterName: opts.ClusterName, KubernetesVersion: opts.KubernetesVersion,
		Catalog: cat, Seed: opts.Seed, Now: opts.Now, After: s.after,
		PendingDelay: d.Pending, ShuttingDownDelay: d.ShuttingDown, ConsistencyDelay: d.Consistency, Rules: rules, Throttle: opts.Throttle,
		AccountState: ec2sim.AccountState{
			ServiceLinkedRole: s.ServiceLinkedRoleExists,
			EC2Quota:          func(code string) (float64, bool) { return s.quota("ec2/" + code) },
			VolumeKeyUsable:   s.volumeKeyUsable,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("awssim: %w", err)
	}
	s.sqs = sqssim.New(sqssim.Config{Region: opts.Region, Account: opts.AccountID, Now: opts.Now, Scale: opts.TimeScale, Seed: opts.Seed})
	s.events = eventsim.New(eventsim.Config{Region: opts.Region, Account: opts.AccountID, Now: opts.Now, Seed: opts.Seed, Deliver: s.deliverToSQS})
	s.ec2.OnTransition(s.onTransition)

	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("awssim: listen: %w", err)
	}
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.sqs.SetBaseURL(s.URL())
	go func() { _ = s.http.Serve(s.ln) }()
	return s, nil
}

// defaults fills the unset options.
func (opts *Options) defaults() {
	if opts.Region == "" {
		opts.Region = "us-west-2"
	}
	if opts.AccountID == "" {
		opts.AccountID = DefaultAccountID
	}
	if opts.AccessKeyID == "" {
		opts.AccessKeyID, opts.SecretAccessKey = DefaultAccessKeyID, DefaultSecretAccessKey
	}
	if opts.CallerARN == "" {
		opts.CallerARN = fmt.Sprintf("arn:aws:iam::%s:role/nodewright", opts.AccountID)
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.0.0.0/24"
	}
	if opts.Identities == nil {
		opts.Identities = []Identity{{ARN: fmt.Sprintf("arn:aws:iam::%s:*", opts.AccountID), Groups: []string{"system:masters"}}}
	}
	if opts.MinLatency == 0 {
		opts.MinLatency = time.Millisecond
	}
	if opts.TimeScale <= 0 {
		opts.TimeScale = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &opts.Delays
	for _, p := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&d.Pending, DefaultPendingDelay}, {&d.ShuttingDown, 10 * time.Second}, {&d.NodeRegistration, 10 * time.Second}, {&d.SpotInterruption, 120 * time.Second}} {
		if *p.v == 0 {
			*p.v = p.def
		}
	}
}

// catalog is the instance type catalog: given, from EC2 API data, from an
// aws-data directory, embedded, or the built-in default, in that order.
func (opts *Options) catalog() (*ec2sim.Catalog, error) {
	switch {
	case opts.Catalog != nil:
		return opts.Catalog, nil
	case opts.EC2Data != nil:
		return ec2sim.FromEC2Input(*opts.EC2Data), nil
	case opts.AWSDataDir != "":
		cat, err := ec2sim.LoadAWSData(opts.AWSDataDir, opts.Region)
		if err != nil {
			return nil, fmt.Errorf("awssim: %w", err)
		}
		return cat, nil
	default:
		if c, err := ec2sim.Embedded(opts.Region); err == nil {
			return c, nil
		}
		return ec2sim.DefaultCatalog(opts.Region), nil
	}
}

// URL is the endpoint for every simulated service (AWS_ENDPOINT_URL).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// ClientConfig is an AWS SDK configuration that reaches every simulated
// service of the region, signing with the simulator's own credentials.
func (s *Server) ClientConfig() aws.Config {
	return aws.Config{Region: s.opts.Region, BaseEndpoint: aws.String(s.URL()),
		Credentials: credentials.NewStaticCredentialsProvider(s.opts.AccessKeyID, s.opts.SecretAccessKey, "")}
}

// EC2 exposes the simulated region for tests: instances, capacity, AMIs, prices.
func (s *Server) EC2() *ec2sim.Cloud { return s.ec2 }

// SQS exposes the simulated queues.
func (s *Server) SQS() *sqssim.Service { return s.sqs }

// Events exposes the simulated EventBridge bus.
func (s *Server) Events() *eventsim.Bus { return s.events }

// Options returns the options with defaults applied.
func (s *Server) Options() Options { return s.opts }

// Close stops the server, every pending timer and the kubelet emulation.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	timers := s.timers
	s.timers = nil
	s.mu.Unlock()
	for _, t := range timers {
		t.Stop()
	}
	s.stopOnce.Do(func() { close(s.stop) })
	// End SQS long polls first: a ReceiveMessage may wait 20 s, longer than
	// Shutdown waits for in-flight requests.
	s.sqs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A client still mid-request (a test's abandoned goroutine) must
		// not fail the run: cut its connection, as a stopping server would.
		err = s.http.Close()
	}
	s.wg.Wait()
	s.dynamoClient.CloseIdleConnections()
	return err
}

// after runs f after d of simulated time, unless the server closes first.
func (s *Server) after(d time.Duration, f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(s.scale(d), func() {
		s.mu.Lock()
		closed := s.closed
		for i, x := range s.timers {
			if x == t {
				s.timers = append(s.timers[:i], s.timers[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		if !closed {
			f()
		}
	})
	s.timers = append(s.timers, t)
}

func (s *Server) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.opts.TimeScale)
}

func (s *Server) requestID() string {
	s.mu.Lock()
	s.reqSeq++
	n := s.reqSeq
	s.mu.Unlock()
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(s.opts.Seed), n)
}

// jsonServices maps X-Amz-Target prefixes to signing names and __type prefixes.
var jsonServices = map[string]struct{ name, typePrefix string }{
	"AmazonSSM":           {"ssm", ""},
	"AWSPriceListService": {"pricing", ""},
	"AmazonSQS":           {"sqs", "com.amazonaws.sqs#"},
	"AWSEvents":           {"events", ""},
	"secretsmanager":      {"secretsmanager", ""},
	// Service Quotas (awsJson1_1, target prefix ServiceQuotasV20190624).
	"ServiceQuotasV20190624": {"servicequotas", ""},
}

// ServeHTTP routes by token-review path, X-Amz-Target, EKS path or Action.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == tokenReviewPath {
		s.serveTokenReview(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	reqID := s.requestID()
	// A floor on latency, like any real network round trip: answering
	// within microseconds on loopback races aws-sdk-go-v2, which closes the
	// request body as soon as response headers arrive while net/http's
	// write loop is still finishing the request; the write loop then fails
	// and closes the connection under a response still being decoded
	// ("use of closed network connection", cf. aws-sdk-go-v2#1825).
	time.Sleep(s.opts.MinLatency)
	signing := protocol.ServiceFromRequest(r)
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		prefix, op, _ := strings.Cut(target, ".")
		if prefix == dynamoTargetPrefix {
			s.serveDynamoDB(w, r, reqID, op, body)
			return
		}
		js, ok := jsonServices[prefix]
		if !ok {
			protocol.WriteError(w, protocol.JSON, reqID, protocol.Errorf("UnknownOperationException", "unknown target %s", target), "")
			return
		}
		s.serveJSON(w, r, reqID, js.name, js.typePrefix, op, body)
		return
	}
	if signing == "lambda" || strings.HasPrefix(r.URL.Path, lambdaAPIPrefix) {
		s.serveLambda(w, r, reqID)
		return
	}
	if signing == "eks" || strings.HasPrefix(r.URL.Path, "/clusters") {
		s.serveEKS(w, r, reqID)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		protocol.WriteError(w, protocol.EC2Query, reqID, protocol.Errorf("MalformedQueryString", "%s", err.Error()), "")
		return
	}
	for k, v := range r.URL.Query() {
		if _, ok := form[k]; !ok {
			form[k] = v
		}
	}
	action := form.Get("Action")
	switch {
	case signing == "sts" || action == "GetCallerIdentity":
		s.serveSTS(w, r, reqID, action, form)
	case signing == "iam":
		s.serveIAM(w, r, reqID, action, form)
	case signing == "cloudformation":
		s.serveCloudFormation(w, r, reqID, action, form)
	case action != "":
		s.serveEC2(w, r, reqID, action, form)
	default:
		protocol.WriteError(w, protocol.EC2Query, reqID, protocol.Errorf("MissingAction", "no Action, X-Amz-Target or known path in request to %s", r.URL.Path), "")
	}
}

// begin applies faults and returns a func that records the call. Services
// that do not serve lost responses fail before serving; use beginLossy to
// learn that the fault is a lost response instead.
func (s *Server) begin(ctx context.Context, service, op string, params map[string]string) (*protocol.APIError, func(*protocol.APIError, int)) {
	ferr, _, done := s.beginLossy(ctx, service, op, params)
	return ferr, done
}

// beginLossy is begin that also reports whether ferr replaces the response
// of a call that must still be served (Fault.LoseResponse).
func (s *Server) beginLossy(ctx context.Context, service, op string, params map[string]string) (*protocol.APIError, bool, func(*protocol.APIError, int)) {
	start := time.Now()
	latency, ferr, lost := s.faults.check(service, op)
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-ctx.Done():
		}
	}
	return ferr, lost, func(e *protocol.APIError, status int) {
		c := Call{Time: s.opts.Now(), Service: service, Operation: op, Params: params, Status: status, Duration: time.Since(start)}
		if e != nil {
			c.ErrorCode, c.Status = e.Code, e.Status
		}
		s.log.add(c)
		s.logger.Debug("aws call", "service", service, "operation", op, "error", c.ErrorCode)
	}
}

func (s *Server) serveEC2(w http.ResponseWriter, r *http.Request, reqID, action string, form url.Values) {
	ferr, lost, done := s.beginLossy(r.Context(), "ec2", action, flatten(form))
	if ferr != nil && !lost {
		done(ferr, 0)
		protocol.WriteError(w, protocol.EC2Query, reqID, ferr, "")
		return
	}
	if ferr == nil {
		if ae := s.authorizeEC2(r, action, form); ae != nil {
			done(ae, 0)
			protocol.WriteError(w, protocol.EC2Query, reqID, ae, "")
			return
		}
		if dryRun(form) {
			s.serveDryRun(w, reqID, action, form, done)
			return
		}
	}
	out, err := s.ec2.Handle(withCaller(r.Context(), accessKeyOf(r)), action, form)
	if ferr != nil {
		// Served, but the caller never hears how it went.
		done(ferr, 0)
		protocol.WriteError(w, protocol.EC2Query, reqID, ferr, "")
		return
	}
	if err != nil {
		ae := protocol.AsAPIError(err)
		done(ae, 0)
		protocol.WriteError(w, protocol.EC2Query, reqID, ae, "")
		return
	}
	done(nil, http.StatusOK)
	body := wire.EncodeResponse(action, reqID, out)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func flatten(form url.Values) map[string]string {
	m := make(map[string]string, len(form))
	for k, v := range form {
		if len(v) > 0 {
			m[k] = v[0]
		}
	}
	return m
}
