package scheduling_test

import (
	"context"
	"encoding/json"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// A node digested by the caller (scheduling.DigestNode, as a disruption
// pass does once for all its simulations) solves exactly as one the
// solver digests itself.
func TestDigestedNodesSolveTheSame(t *testing.T) {
	for seed := range 150 {
		solve := func(digest bool) string {
			in := randomInput(rand.New(rand.NewSource(int64(seed))))
			for i, en := range in.Nodes {
				en.Initialized = (seed+i)%3 != 0 // some still starting: DaemonSet pods to come
				if digest {
					en.Digest = scheduling.DigestNode(en, nil)
				}
			}
			plan, err := scheduling.Solve(context.Background(), in)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			out, err := json.Marshal(plan)
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}
		if got, want := solve(true), solve(false); got != want {
			t.Fatalf("seed %d: digested nodes plan\n%s\nundigested\n%s", seed, got, want)
		}
	}
}

func TestNodeDigestRoom(t *testing.T) {
	en := existing("n", "zone-a", "4", mkPod(podOpts{name: "a", cpu: "1500m", mem: "1Gi"}), mkPod(podOpts{name: "b", cpu: "250m", mem: "512Mi"}))
	d := scheduling.DigestNode(en, nil)
	for name, want := range map[corev1.ResourceName]int64{
		corev1.ResourceCPU: 2250, corev1.ResourceMemory: 16<<30 - 1536<<20, corev1.ResourcePods: 108, "nvidia.com/gpu": 0,
	} {
		if got := d.Room(name); got != want {
			t.Errorf("room of %s: got %d, want %d", name, got, want)
		}
	}
}
