//go:build tools

// Package tools pins the Kubernetes control plane, kubectl, etcd and KWOK so the local
// cloud harness can build them from the module proxy. It lives in its own
// module so the main module's dependency graph stays lean.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
