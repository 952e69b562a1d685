package karpenter_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

// Who launched a node or instance.
const (
	byKarpenter  = "karpenter"
	byNodewright = "nodewright"
	// byOther is the instance launched with Karpenter's AWS provider's
	// tags (karpenterAWSInstance) and the Node the simulator registers
	// for it: neither autoscaler here created it.
	byOther = "other"
)

// fleet remembers every Node ever seen and who launched it, polling the
// API server: Karpenter's KWOK nodes have kwok:// provider IDs, nodewright's
// carry its NodePool's karpenter.sh/nodepool label, the other's provider ID
// names the instance karpenterAWSInstance launched.
type fleet struct {
	mu      sync.Mutex
	owner   map[string]string // node name -> by*
	current map[string]int    // by* -> nodes now
	other   string            // the other instance's ID
}

func watchFleet(t *testing.T, e *cloudtest.Env, other string) *fleet {
	t.Helper()
	f := &fleet{owner: map[string]string{}, current: map[string]int{}, other: other}
	ctx, stop := context.WithCancel(e.Ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			f.poll(ctx, e)
			time.Sleep(200 * time.Millisecond)
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })
	f.poll(e.Ctx, e)
	return f
}

func (f *fleet) poll(ctx context.Context, e *cloudtest.Env) {
	nodes, err := e.Cloud.KubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.current = map[string]int{}
	for _, n := range nodes.Items {
		by := ""
		switch {
		case strings.HasPrefix(n.Spec.ProviderID, "kwok://"):
			by = byKarpenter
		case f.other != "" && strings.HasSuffix(n.Spec.ProviderID, "/"+f.other):
			by = byOther
		case n.Labels["karpenter.sh/nodepool"] == e.Pool:
			by = byNodewright
		}
		if by != "" {
			f.owner[n.Name] = by
			f.current[by]++
		}
	}
}

// ownerOf is who launched node ("" when never seen).
func (f *fleet) ownerOf(node string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.owner[node]
}

// count is how many of by's nodes exist now.
func (f *fleet) count(by string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current[by]
}

func (f *fleet) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("karpenter=%d nodewright=%d other=%d (seen %d nodes)", f.current[byKarpenter], f.current[byNodewright], f.current[byOther], len(f.owner))
}
