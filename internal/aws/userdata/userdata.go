// Package userdata renders EC2 user data that joins a node to an EKS cluster,
// one bootstrapper per AMI family, merged with the EC2NodeClass's own user data
// the way Karpenter merges it. Output is deterministic for equal input so that
// launch templates keyed by a hash of it are reused rather than multiplied.
package userdata

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Family names an AMI family, spelled as EC2NodeClass amiFamily values.
type Family string

// AMI families nodewright can bootstrap.
const (
	AL2023       Family = "AL2023"
	AL2          Family = "AL2"
	Bottlerocket Family = "Bottlerocket"
	Windows2022  Family = "Windows2022"
	Custom       Family = "Custom"
)

// Kubelet is the subset of the EC2NodeClass kubelet configuration that reaches
// the node's bootstrap. Nil pointers and empty maps mean "AMI default".
type Kubelet struct {
	ClusterDNS                  []string
	MaxPods                     *int32
	PodsPerCore                 *int32
	SystemReserved              map[string]string
	KubeReserved                map[string]string
	EvictionHard                map[string]string
	EvictionSoft                map[string]string
	EvictionSoftGracePeriod     map[string]time.Duration
	EvictionMaxPodGracePeriod   *int32
	ImageGCHighThresholdPercent *int32
	ImageGCLowThresholdPercent  *int32
	CPUCFSQuota                 *bool
}

// Options is everything a bootstrapper needs.
type Options struct {
	Family          Family
	ClusterName     string
	ClusterEndpoint string
	// CABundle is the cluster CA as EKS DescribeCluster returns it (base64 PEM).
	CABundle string
	// ServiceCIDR is the cluster's Kubernetes service CIDR; nodeadm requires it.
	ServiceCIDR string
	Kubelet     Kubelet
	Labels      map[string]string
	// Taints are registered with the node in this order (NodePool taints,
	// startup taints, then karpenter.sh/unregistered).
	Taints []corev1.Taint
	// Custom is the EC2NodeClass spec.userData, merged per family.
	Custom string
	// InstanceStorePolicy "RAID0" asks the bootstrap to stripe local NVMe disks.
	InstanceStorePolicy string
}

// ErrMissingField is wrapped by Generate when a required option is empty.
var ErrMissingField = errors.New("missing required field")

// Generate renders the plain-text (not base64) user data for o.Family.
func Generate(o Options) (string, error) {
	if o.Family == Custom {
		// Custom AMIs bootstrap themselves; the user's data goes through untouched.
		return o.Custom, nil
	}
	if err := o.validate(); err != nil {
		return "", err
	}
	switch o.Family {
	case AL2023:
		return nodeadm(o)
	case AL2:
		return eksBootstrap(o)
	case Bottlerocket:
		return bottlerocket(o)
	case Windows2022:
		return windows(o), nil
	default:
		return "", fmt.Errorf("user data: unknown AMI family %q (want AL2023, AL2, Bottlerocket, Windows2022 or Custom)", o.Family)
	}
}

func (o Options) validate() error {
	var missing []string
	if o.ClusterName == "" {
		missing = append(missing, "ClusterName")
	}
	if o.ClusterEndpoint == "" {
		missing = append(missing, "ClusterEndpoint")
	}
	if o.CABundle == "" {
		missing = append(missing, "CABundle")
	}
	if o.Family == AL2023 && o.ServiceCIDR == "" {
		missing = append(missing, "ServiceCIDR (nodeadm needs the cluster's service CIDR)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("user data for %s: %w: %s", o.Family, ErrMissingField, strings.Join(missing, ", "))
	}
	return nil
}

// isIPv6 reports whether the cluster DNS address (and so the cluster) is IPv6.
func (o Options) isIPv6() bool {
	if len(o.Kubelet.ClusterDNS) == 0 {
		return false
	}
	ip := net.ParseIP(o.Kubelet.ClusterDNS[0])
	return ip != nil && ip.To4() == nil
}

// setPtr sets m[key] to *v when v is set (a kubelet setting left unset
// keeps the AMI's default).
func setPtr[T any](m map[string]any, key string, v *T) {
	if v != nil {
		m[key] = *v
	}
}

// setMap sets m[key] to v when v has entries.
func setMap[V any](m map[string]any, key string, v map[string]V) {
	if len(v) > 0 {
		m[key] = v
	}
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// labelList is "k1=v1,k2=v2" with sorted keys.
func labelList(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for _, k := range sortedKeys(labels) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// taintList is the kubelet --register-with-taints form: key=value:Effect,...
func taintList(taints []corev1.Taint) string {
	parts := make([]string, 0, len(taints))
	for _, t := range taints {
		parts = append(parts, t.ToString())
	}
	return strings.Join(parts, ",")
}

func joinMap(m map[string]string, sep string) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+sep+m[k])
	}
	return strings.Join(parts, ",")
}

// kubeletExtraArgs are the kubelet flags for bootstrappers that take flags
// (AL2 bootstrap.sh, Windows Start-EKSBootstrap.ps1).
func (o Options) kubeletExtraArgs() []string {
	var args []string
	if len(o.Labels) > 0 {
		args = append(args, fmt.Sprintf("--node-labels=%q", labelList(o.Labels)))
	}
	if len(o.Taints) > 0 {
		args = append(args, fmt.Sprintf("--register-with-taints=%q", taintList(o.Taints)))
	}
	k := o.Kubelet
	if k.MaxPods != nil {
		args = append(args, fmt.Sprintf("--max-pods=%d", *k.MaxPods))
	}
	if k.PodsPerCore != nil {
		args = append(args, fmt.Sprintf("--pods-per-core=%d", *k.PodsPerCore))
	}
	for _, m := range []struct {
		flag string
		vals map[string]string
		sep  string
	}{
		{"--system-reserved", k.SystemReserved, "="},
		{"--kube-reserved", k.KubeReserved, "="},
		{"--eviction-hard", k.EvictionHard, "<"},
		{"--eviction-soft", k.EvictionSoft, "<"},
		{"--eviction-soft-grace-period", durations(k.EvictionSoftGracePeriod), "="},
	} {
		if len(m.vals) > 0 {
			args = append(args, fmt.Sprintf("%s=%q", m.flag, joinMap(m.vals, m.sep)))
		}
	}
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, fmt.Sprintf("--eviction-max-pod-grace-period=%d", *k.EvictionMaxPodGracePeriod))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-high-threshold=%d", *k.ImageGCHighThresholdPercent))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-low-threshold=%d", *k.ImageGCLowThresholdPercent))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, fmt.Sprintf("--cpu-cfs-quota=%t", *k.CPUCFSQuota))
	}
	return args
}

func durations(m map[string]time.Duration) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.String()
	}
	return out
}

// shellQuote single-quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// psQuote single-quotes s for PowerShell, where ' is escaped by doubling.
func psQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// HasTaint reports whether taints holds one with t's key and effect.
func HasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
}
