package localrun

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud"
)

// Status is the one-line summary `nodewright local up` prints every
// interval.
type Status struct {
	// Pending counts the pods no node runs yet (all namespaces).
	Pending int
	// Nodes counts nodewright's nodes by "<NodePool>/<capacity type>".
	Nodes map[string]int
	// Instances counts the instances still running, CostPerHour prices
	// them.
	Instances   int
	CostPerHour float64
}

// CurrentStatus reads the status from the cluster and the simulator.
func CurrentStatus(ctx context.Context, cloud *localcloud.Cloud) (Status, error) {
	st := Status{Nodes: map[string]int{}}
	pods, err := cloud.KubeClient.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return st, fmt.Errorf("list pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodPending {
			st.Pending++
		}
	}
	nodes, err := cloud.KubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apis.NodePoolLabelKey})
	if err != nil {
		return st, fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		l := nodes.Items[i].Labels
		st.Nodes[l[apis.NodePoolLabelKey]+"/"+l[apis.CapacityTypeLabelKey]]++
	}
	for _, in := range Instances(cloud.AWS.EC2()) {
		if in.Live() {
			st.Instances++
			st.CostPerHour += in.Price
		}
	}
	return st, nil
}

// String is the status line, e.g.
// "pending pods 3 | nodes default/spot=2 gpu/on-demand=1 | instances 3 | $0.4210/h".
func (s Status) String() string {
	keys := make([]string, 0, len(s.Nodes))
	for k := range s.Nodes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	nodes := "none"
	if len(keys) > 0 {
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%d", k, s.Nodes[k])
		}
		nodes = strings.Join(parts, " ")
	}
	return fmt.Sprintf("pending pods %d | nodes %s | instances %d | $%.4f/h", s.Pending, nodes, s.Instances, s.CostPerHour)
}
