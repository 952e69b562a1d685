// Package kubeplane runs a real Kubernetes control plane on loopback: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and KWOK (fake
// kubelets), built from the pinned tools module. It generates the PKI, writes
// a kubeconfig and stops every process it started, by PID, on Close.
package kubeplane

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodewright/nodewright/internal/localcloud/internal/proc"
)

//go:embed stages.yaml
var stagesYAML string

// KWOKAnnotation marks the Nodes KWOK plays the kubelet for.
const KWOKAnnotation = "kwok.x-k8s.io/node"

// ServiceClusterIPRange is the Service CIDR; the API server's in-cluster
// address is its first IP, 10.0.0.1.
const ServiceClusterIPRange = "10.0.0.0/24"

// Options configure a control plane.
type Options struct {
	// TokenWebhookURL, when set, is the URL of a TokenReview endpoint
	// (the simulator's) that authenticates bearer tokens the static token
	// file does not know, such as EKS-style IAM tokens.
	TokenWebhookURL string
	// Dir holds the PKI, etcd data, kubeconfigs and logs. Empty means a new
	// temporary directory that Close removes.
	Dir string
	// Binaries overrides the binaries to run; nil means EnsureBinaries.
	Binaries *Binaries
	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds the whole start-up, builds excluded. Default 90 s.
	StartTimeout time.Duration
	// Users are extra static-token users (see UserRESTConfig).
	Users []User
	// AuditGroups are the groups whose requests are audit-logged for
	// Forbidden.
	AuditGroups []string
	// NodeLease is the lease duration of KWOK's nodes (renewed every
	// quarter of it), default 40 s as a kubelet's. 1,000 nodes renew 100
	// leases a second at the default, more writes than anything a test
	// makes; a longer lease makes a large cluster cheaper to keep alive.
	NodeLease time.Duration
	// NodeGrace is how long the controller manager waits for a node's
	// lease before it marks the node unreachable (taints it, marks its
	// pods not ready, then evicts them); default its own (50 s). KWOK
	// renewing thousands of leases on a loaded machine falls minutes
	// behind: a seeded cluster, where no node ever dies, sets it long.
	NodeGrace time.Duration
	// Profiling serves the API server's /debug/pprof (to cluster admins),
	// for measuring what a client's requests cost the server.
	Profiling bool
}

// nodeLease is Options.NodeLease or its default.
func (o Options) nodeLease() time.Duration {
	if o.NodeLease > 0 {
		return o.NodeLease
	}
	return 40 * time.Second
}

// Plane is a running control plane.
type Plane struct {
	// Kubeconfig is the path of an admin kubeconfig (static token).
	Kubeconfig string
	// Dir is the working directory holding logs and state.
	Dir string
	// Endpoint is the API server URL, https://127.0.0.1:<port>.
	Endpoint string
	// CAData is the PEM of the CA that signed the API server's certificate.
	CAData []byte
	// Kubectl is the path of the kubectl built with the control plane, at
	// its Kubernetes version.
	Kubectl string

	rest   *rest.Config
	client kubernetes.Interface
	ownDir bool
	logger *slog.Logger

	userTokens map[string]string
	auditLog   string

	mu    sync.Mutex
	procs []*proc.Process // in start order
}

// RESTConfig returns a copy of the admin client configuration.
func (p *Plane) RESTConfig() *rest.Config { return rest.CopyConfig(p.rest) }

// Client is an admin clientset.
func (p *Plane) Client() kubernetes.Interface { return p.client }

// PIDs lists the processes the plane runs, for state files.
func (p *Plane) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	pids := make([]int, 0, len(p.procs))
	for _, pr := range p.procs {
		pids = append(pids, pr.PID())
	}
	return pids
}

// LogPath is the log file of a component (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok).
func (p *Plane) LogPath(component string) string {
	return filepath.Join(p.Dir, "logs", component+".log")
}

type tokens struct{ admin, kcm, scheduler, kwok string }

// Start builds (if needed) and starts the control plane and returns once the
// API server is ready and the controller manager is running controllers.
func Start(ctx context.Context, opts Options) (_ *Plane, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	bins := opts.Binaries
	if bins == nil {
		if bins, err = EnsureBinaries(ctx, logger); err != nil {
			return nil, err
		}
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Ports are picked free but only bound later by the children; another
	// process can take one in between. Retry with fresh ports when a
	// component reports exactly that (not possible with a caller's Dir,
	// which already holds the failed attempt's etcd data).
	for attempt := 1; ; attempt++ {
		p, err := start(ctx, opts, bins, logger)
		if err == nil || attempt == 3 || opts.Dir != "" || ctx.Err() != nil ||
			!strings.Contains(err.Error(), "address already in use") {
			return p, err
		}
		logger.WarnContext(ctx, "control plane port taken; retrying with fresh ports", "attempt", attempt, "err", err)
	}
}

// startup is one start attempt's state, passed between its phases.
type startup struct {
	opts      Options
	bins      *Binaries
	pk        *pki
	tok       tokens
	tokenFile string
	etcdURL   string
	apiPort   int
}

func start(ctx context.Context, opts Options, bins *Binaries, logger *slog.Logger) (_ *Plane, err error) {
	p := &Plane{Dir: opts.Dir, logger: logger, Kubectl: bins.Kubectl}
	if p.Dir == "" {
		if p.Dir, err = os.MkdirTemp("", "nodewright-kube-"); err != nil {
			return nil, fmt.Errorf("start control plane: %w", err)
		}
		p.ownDir = true
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	s := &startup{opts: opts, bins: bins}
	if err := p.writeCredentials(s); err != nil {
		return nil, err
	}
	ports, err := proc.FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer := ports[0], ports[1]
	s.apiPort = ports[2]
	if err := p.connect(s); err != nil {
		return nil, err
	}
	etcd, err := p.startEtcd(ctx, s, etcdClient, etcdPeer)
	if err != nil {
		return nil, err
	}
	apiserver, err := p.startAPIServer(ctx, s)
	if err != nil {
		return nil, err
	}
	kcm, kwok, err := p.startControllers(s)
	if err != nil {
		return nil, err
	}
	// The controller manager creates every namespace's "default" service
	// account; its appearance shows the controllers are running, and pods can
	// be created without racing the service-account admission check.
	if err := p.waitServiceAccount(ctx, "default", kcm); err != nil {
		return nil, kcm.StartError("start kube-controller-manager", err)
	}
	for _, pr := range []*proc.Process{etcd, apiserver, kcm, kwok} {
		if exited, werr := pr.Exited(); exited {
			return nil, pr.StartError("start "+pr.Name, proc.ExitedError("", werr))
		}
	}
	logger.InfoContext(ctx, "control plane ready", "endpoint", p.Endpoint, "kubeconfig", p.Kubeconfig)
	return p, nil
}

// writeCredentials creates the working directories and writes the PKI and
// the static token file.
func (p *Plane) writeCredentials(s *startup) error {
	for _, d := range []string{"pki", "logs", "etcd", "kwok-home"} {
		if err := os.MkdirAll(filepath.Join(p.Dir, d), 0o700); err != nil {
			return fmt.Errorf("start control plane: %w", err)
		}
	}
	pk, err := writePKI(filepath.Join(p.Dir, "pki"))
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	s.pk = pk
	p.CAData = pk.CAPEM
	s.tok = tokens{admin: randToken(), kcm: randToken(), scheduler: randToken(), kwok: randToken()}
	s.tokenFile = filepath.Join(p.Dir, "pki", "tokens.csv")
	// Groups: the admin and KWOK need everything; the controller manager runs
	// every controller with its own credentials (no per-controller service
	// accounts), so it needs everything too; the scheduler gets the RBAC
	// bootstrap role for its well-known user.
	tokenCSV := strings.Join(append([]string{
		s.tok.admin + `,nodewright-admin,uid-admin,"system:masters"`,
		s.tok.kcm + `,system:kube-controller-manager,uid-kcm,"system:masters"`,
		s.tok.scheduler + `,system:kube-scheduler,uid-scheduler`,
		s.tok.kwok + `,kwok,uid-kwok,"system:masters"`,
	}, p.userTokenLines(s.opts.Users)...), "\n") + "\n"
	if err := os.WriteFile(s.tokenFile, []byte(tokenCSV), 0o600); err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	return nil
}

// connect sets the endpoint and the admin client and writes the components'
// kubeconfigs.
func (p *Plane) connect(s *startup) (err error) {
	p.Endpoint = "https://127.0.0.1:" + strconv.Itoa(s.apiPort)
	p.rest = &rest.Config{
		Host:            p.Endpoint,
		BearerToken:     s.tok.admin,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.pk.CAPEM},
		QPS:             200,
		Burst:           400,
		UserAgent:       "nodewright-localcloud",
	}
	if p.client, err = kubernetes.NewForConfig(p.rest); err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}

	kubeconfigs := map[string]string{"admin": s.tok.admin, "kube-controller-manager": s.tok.kcm, "kube-scheduler": s.tok.scheduler, "kwok": s.tok.kwok}
	for name, token := range kubeconfigs {
		if err := writeKubeconfig(filepath.Join(p.Dir, name+".kubeconfig"), p.Endpoint, s.pk.CAPEM, name, token); err != nil {
			return err
		}
	}
	p.Kubeconfig = filepath.Join(p.Dir, "admin.kubeconfig")
	return nil
}

// startEtcd starts etcd and waits for it to be healthy.
func (p *Plane) startEtcd(ctx context.Context, s *startup, clientPort, peerPort int) (*proc.Process, error) {
	// etcd: in the temp dir, no fsync (the data is thrown away anyway).
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	etcd, err := p.start("etcd", s.bins.Etcd,
		"--name=local",
		"--data-dir="+filepath.Join(p.Dir, "etcd"),
		"--listen-client-urls="+s.etcdURL, "--advertise-client-urls="+s.etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=local="+peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, etcd, http.DefaultClient, s.etcdURL+"/health", ""); err != nil {
		return nil, etcd.StartError("start etcd", err)
	}
	return etcd, nil
}

// startAPIServer starts kube-apiserver and waits for /readyz.
func (p *Plane) startAPIServer(ctx context.Context, s *startup) (*proc.Process, error) {
	apiArgs, err := p.apiServerArgs(s)
	if err != nil {
		return nil, err
	}
	apiserver, err := p.start("kube-apiserver", s.bins.KubeAPIServer, apiArgs...)
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(p.rest)
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	if err := waitHTTP(ctx, apiserver, &http.Client{Transport: rt, Timeout: 5 * time.Second}, p.Endpoint+"/readyz", "ok"); err != nil {
		return nil, apiserver.StartError("start kube-apiserver", err)
	}
	return apiserver, nil
}

func (p *Plane) apiServerArgs(s *startup) ([]string, error) {
	pk := s.pk
	apiArgs := []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.apiPort),
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + pk.ServingCert,
		"--tls-private-key-file=" + pk.ServingKey,
		"--client-ca-file=" + pk.CACert,
		"--token-auth-file=" + s.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pk.SAPub,
		"--service-account-signing-key-file=" + pk.SAKey,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--allow-privileged=true",
		"--profiling=" + strconv.FormatBool(s.opts.Profiling),
		"--cert-dir=" + filepath.Join(p.Dir, "pki"),
	}
	audit, err := p.auditArgs(s.opts.AuditGroups)
	if err != nil {
		return nil, err
	}
	apiArgs = append(apiArgs, audit...)
	if s.opts.TokenWebhookURL != "" {
		whPath := filepath.Join(p.Dir, "token-webhook.kubeconfig")
		if err := writeWebhookKubeconfig(whPath, s.opts.TokenWebhookURL); err != nil {
			return nil, err
		}
		apiArgs = append(apiArgs,
			"--authentication-token-webhook-config-file="+whPath,
			"--authentication-token-webhook-version=v1",
			// Short, so a test that revokes an identity sees it soon.
			"--authentication-token-webhook-cache-ttl=10s",
		)
	}
	return apiArgs, nil
}

// startControllers starts kube-controller-manager, kube-scheduler and KWOK,
// without waiting for them.
func (p *Plane) startControllers(s *startup) (kcm, kwok *proc.Process, err error) {
	kcm, err = p.start("kube-controller-manager", s.bins.KubeControllerManager, p.kcmArgs(s)...)
	if err != nil {
		return nil, nil, err
	}
	if err := p.startScheduler(s); err != nil {
		return nil, nil, err
	}
	kwok, err = p.startKWOK(s)
	if err != nil {
		return nil, nil, err
	}
	return kcm, kwok, nil
}

// kcmArgs are kube-controller-manager's flags.
func (p *Plane) kcmArgs(s *startup) []string {
	pk := s.pk
	args := []string{
		"--kubeconfig=" + filepath.Join(p.Dir, "kube-controller-manager.kubeconfig"),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--controllers=*",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + pk.SAKey,
		"--root-ca-file=" + pk.CACert,
		"--cluster-signing-cert-file=" + pk.CACert,
		"--cluster-signing-key-file=" + pk.CAKey,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--allocate-node-cidrs=false",
		// Small clusters: act on a dead node after 40 s, like upstream defaults,
		// but re-check often so tests observe it promptly.
		"--node-monitor-period=2s",
		"--profiling=" + strconv.FormatBool(s.opts.Profiling),
		// The default 20 QPS throttles the disruption and garbage-collection
		// controllers during bursts that tests provoke on purpose.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}
	if s.opts.NodeGrace > 0 {
		args = append(args, "--node-monitor-grace-period="+s.opts.NodeGrace.String())
	}
	return args
}

func (p *Plane) startScheduler(s *startup) error {
	// The scheduler's client rate limit (50 QPS by default) is what slows
	// marking a burst of pods Unschedulable: each is a status write. EKS runs
	// its scheduler well above that, so the local one does too.
	schedConfig := filepath.Join(p.Dir, "kube-scheduler-config.yaml")
	if err := os.WriteFile(schedConfig, []byte(fmt.Sprintf(schedulerConfigYAML, filepath.Join(p.Dir, "kube-scheduler.kubeconfig"))), 0o644); err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	_, err := p.start("kube-scheduler", s.bins.KubeScheduler,
		"--config="+schedConfig,
		"--authentication-kubeconfig="+filepath.Join(p.Dir, "kube-scheduler.kubeconfig"),
		"--authorization-kubeconfig="+filepath.Join(p.Dir, "kube-scheduler.kubeconfig"),
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--profiling="+strconv.FormatBool(s.opts.Profiling),
	)
	return err
}

func (p *Plane) startKWOK(s *startup) (*proc.Process, error) {
	stagesPath := filepath.Join(p.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(stagesPath, []byte(strings.ReplaceAll(stagesYAML, "@KUBE_VERSION@", KubeVersion)), 0o644); err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	return p.startEnv("kwok", s.bins.KWOK,
		// KWOK reads ~/.kwok/kwok.yaml if present; a private HOME keeps a
		// developer's own KWOK setup out of the tests.
		proc.EnvWith("HOME="+filepath.Join(p.Dir, "kwok-home")),
		"--kubeconfig="+filepath.Join(p.Dir, "kwok.kubeconfig"),
		"--config="+stagesPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+KWOKAnnotation+"=fake",
		"--node-lease-duration-seconds="+strconv.Itoa(int(s.opts.nodeLease().Seconds())),
		"--cidr=10.64.0.0/10",
	)
}

func (p *Plane) start(name, path string, args ...string) (*proc.Process, error) {
	return p.startEnv(name, path, nil, args...)
}

func (p *Plane) startEnv(name, path string, env []string, args ...string) (*proc.Process, error) {
	pr, err := proc.Start(proc.Spec{Name: name, Path: path, Args: args, Env: env, Dir: p.Dir, Log: p.LogPath(name)})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.procs = append(p.procs, pr)
	p.mu.Unlock()
	return pr, nil
}

// WaitServiceAccount waits until the controller manager has created the
// "default" service account in ns; pods cannot be created before it exists.
func (p *Plane) WaitServiceAccount(ctx context.Context, ns string) error {
	return p.waitServiceAccount(ctx, ns, nil)
}

func (p *Plane) waitServiceAccount(ctx context.Context, ns string, kcm *proc.Process) error {
	return proc.Poll(ctx, kcm, 50*time.Millisecond, func() (bool, error) {
		_, err := p.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return true, nil
		}
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			p.logger.DebugContext(ctx, "waiting for default service account", "namespace", ns, "err", err)
		}
		return false, nil
	}, func(err error) error {
		return fmt.Errorf("wait for service account %s/default: %w", ns, err)
	})
}

// Close stops every process (clients first, etcd last) and removes the
// temporary directory. Safe to call more than once.
func (p *Plane) Close() error {
	p.mu.Lock()
	procs := p.procs
	p.procs = nil
	p.mu.Unlock()
	byName := map[string]*proc.Process{}
	for _, pr := range procs {
		byName[pr.Name] = pr
	}
	stopAll := func(names ...string) {
		var wg sync.WaitGroup
		for _, n := range names {
			if pr := byName[n]; pr != nil {
				wg.Go(func() { pr.Stop(5 * time.Second) })
			}
		}
		wg.Wait()
	}
	stopAll("kwok", "kube-scheduler", "kube-controller-manager")
	stopAll("kube-apiserver")
	stopAll("etcd")
	if p.ownDir && p.Dir != "" {
		if err := os.RemoveAll(p.Dir); err != nil {
			return fmt.Errorf("remove control plane dir: %w", err)
		}
		p.Dir = ""
	}
	return nil
}

// waitHTTP polls url until it answers 200 (with a body containing want, if
// set), failing early if the process exits.
func waitHTTP(ctx context.Context, pr *proc.Process, client *http.Client, url, want string) error {
	var last error
	return proc.Poll(ctx, pr, 100*time.Millisecond, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		body := make([]byte, 4096)
		n, _ := resp.Body.Read(body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body[:n]), want) {
			return true, nil
		}
		last = fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body[:n])))
		return false, nil
	}, func(err error) error {
		// The last failure only explains the timeout; it is not wrapped.
		return fmt.Errorf("%s not ready: %w (last: %s)", pr.Name, err, fmt.Sprint(last))
	})
}

func randToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func writeKubeconfig(path, server string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nodewright-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["nodewright-local"] = &clientcmdapi.Context{Cluster: "nodewright-local", AuthInfo: user}
	cfg.CurrentContext = "nodewright-local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// writeWebhookKubeconfig points the API server's token authenticator at url.
func writeWebhookKubeconfig(path, url string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["token-webhook"] = &clientcmdapi.Cluster{Server: url}
	cfg.AuthInfos["kube-apiserver"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["token-webhook"] = &clientcmdapi.Context{Cluster: "token-webhook", AuthInfo: "kube-apiserver"}
	cfg.CurrentContext = "token-webhook"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write token webhook config: %w", err)
	}
	return nil
}

const schedulerConfigYAML = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`
