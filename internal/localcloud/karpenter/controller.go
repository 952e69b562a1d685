package karpenter

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/internal/proc"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// Karpenter's identity in the local cloud: a static-token user in
// system:masters (it needs cluster-wide rights, as its Helm chart's
// ClusterRole gives it) and in Group, whose requests Plane.Audit logs.
const (
	User  = "karpenter"
	Group = "nodewright-test:karpenter"
)

// CloudOptions adds Karpenter's user and its audit group to o, for a
// local cloud Start can run Karpenter in.
func CloudOptions(o localcloud.Options) localcloud.Options {
	o.Users = append(o.Users, kubeplane.User{Name: User, Groups: []string{"system:masters", Group}})
	o.AuditGroups = append(o.AuditGroups, Group)
	return o
}

// Controller is a running Karpenter (KWOK provider) process.
type Controller struct {
	proc *proc.Process
	// Log is the controller's log file (JSON lines).
	Log string
}

// Options tune the controller. Zero values take Karpenter's defaults
// except where noted.
type Options struct {
	// BatchIdle and BatchMax are Karpenter's provisioning batch window
	// (default here 1 s and 3 s, shorter than Karpenter's 1 s and 10 s).
	BatchIdle, BatchMax time.Duration
	// LogLevel is debug, info (default) or error.
	LogLevel string
	Logger   *slog.Logger
}

// Start installs Karpenter's CRDs into cloud's API server and runs the
// controller against it as User, leader election off, its metrics and
// health ports free ones. cloud must have been started with CloudOptions.
// Close stops it.
func Start(ctx context.Context, cloud *localcloud.Cloud, o Options) (*Controller, error) {
	if o.BatchIdle == 0 {
		o.BatchIdle = time.Second
	}
	if o.BatchMax == 0 {
		o.BatchMax = 3 * time.Second
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	b, err := EnsureBinary(ctx, o.Logger)
	if err != nil {
		return nil, err
	}
	if err := InstallCRDs(ctx, cloud.REST, b.CRDs); err != nil {
		return nil, err
	}
	cfg, err := cloud.Plane.UserRESTConfig(User)
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w (start the cloud with CloudOptions)", err)
	}
	dir, err := os.MkdirTemp("", "nodewright-karpenter-")
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, cfg); err != nil {
		return nil, err
	}
	ports, err := proc.FreePorts(2)
	if err != nil {
		return nil, err
	}
	env := proc.EnvWith("KUBECONFIG="+kubeconfig, "DISABLE_LEADER_ELECTION=true",
		fmt.Sprintf("METRICS_PORT=%d", ports[0]), fmt.Sprintf("HEALTH_PROBE_PORT=%d", ports[1]),
		"LOG_LEVEL="+o.LogLevel, "BATCH_IDLE_DURATION="+o.BatchIdle.String(), "BATCH_MAX_DURATION="+o.BatchMax.String())
	c := &Controller{Log: filepath.Join(dir, "karpenter.log")}
	c.proc, err = proc.Start(proc.Spec{Name: "karpenter", Path: b.Binary, Dir: dir, Env: env, Log: c.Log})
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = proc.Poll(wctx, c.proc, 200*time.Millisecond, func() (bool, error) { return httpOK(wctx, readyz), nil },
		func(err error) error { return fmt.Errorf("karpenter: not ready: %w", err) })
	if err != nil {
		c.Close()
		return nil, c.proc.StartError("karpenter", err)
	}
	return c, nil
}

// Close stops the controller.
func (c *Controller) Close() { c.proc.Stop(5 * time.Second) }

// Exited reports whether the controller died, and how.
func (c *Controller) Exited() (bool, error) { return c.proc.Exited() }

// Tail is the end of the controller's log.
func (c *Controller) Tail(n int) string { return c.proc.Tail(n) }

func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// InstallCRDs creates the CRDs in files (one per file) and waits until the
// API server serves them.
func InstallCRDs(ctx context.Context, cfg *rest.Config, files []string) error {
	cs, err := apiextensions.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return fmt.Errorf("karpenter: CRD client: %w", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("karpenter: %w", err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return fmt.Errorf("karpenter: CRD %s: %w", filepath.Base(f), err)
		}
		crds := cs.ApiextensionsV1().CustomResourceDefinitions()
		if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("karpenter: create CRD %s: %w", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not yet visible: poll again
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("karpenter: CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos[User] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: User}
	kc.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("karpenter: kubeconfig: %w", err)
	}
	return nil
}
