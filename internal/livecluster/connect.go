// Package livecluster is what the CLI reads from a running cluster, and
// only reads: `nodewright simulate --kubeconfig` plans for its pods and
// `nodewright import` writes its Karpenter NodePools and EC2NodeClasses to
// files. Every call it makes is a get or a list, so a team can point it at a
// production cluster (with a read-only kubeconfig) before it adopts
// nodewright. No AWS credentials are involved.
package livecluster

import (
	"errors"
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodewright/nodewright/internal/kube"
)

// Clients are one cluster's clients: typed for the snapshot, dynamic for
// Karpenter's custom resources.
type Clients struct {
	Kube    *kube.Client
	Dynamic dynamic.Interface
	// Host is the API server's URL, for messages.
	Host string
}

// Connect builds the clients from a kubeconfig file and context (empty:
// its current context), as kubectl --kubeconfig --context would.
func Connect(kubeconfig, context string) (*Clients, error) {
	if kubeconfig == "" {
		return nil, errors.New("no kubeconfig given")
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = kube.DefaultQPS, kube.DefaultBurst, kube.DefaultTimeout
	cfg.UserAgent = kube.Component + "-cli"
	typed := rest.CopyConfig(cfg)
	// Built-in types come smaller and decode faster as protobuf; custom
	// resources only speak JSON, so the dynamic client keeps the default.
	typed.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kc, err := kube.NewClient(typed, nil)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", cfg.Host, err)
	}
	return &Clients{Kube: kc, Dynamic: dyn, Host: cfg.Host}, nil
}
