package termination

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
)

// unseenCloud is EC2 right after a launch: Terminate finds no instance.
type unseenCloud struct {
	hookCloud
	window time.Duration
}

func (c *unseenCloud) Terminate(ctx context.Context, ids ...string) error {
	_ = c.hookCloud.Terminate(ctx, ids...)
	return fmt.Errorf("terminate %v: %w", ids, nwaws.ErrInstanceNotVisible)
}

func (c *unseenCloud) InvisibleLongEnough(launchedAt, now time.Time) bool {
	return launchedAt.IsZero() || now.Sub(launchedAt) > c.window
}

// TestNotVisibleInstanceIsNotTakenAsGone: a claim launched moments ago
// whose instance EC2 does not show yet keeps waiting (the instance would
// otherwise run on with no claim); one launched longer ago than the
// consistency window finishes, its instance long gone.
func TestNotVisibleInstanceIsNotTakenAsGone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		launched time.Duration // before now
		wantDone bool
	}{{"launched a second ago", time.Second, false}, {"launched an hour ago", time.Hour, true}} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			cl := markedClaim(now)
			cl.SetCondition(apis.ConditionLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(now.Add(-tc.launched)))
			st := newMemStore(cl)
			cloud := &unseenCloud{window: 30 * time.Second}
			term, err := New(Deps{Store: st, Cloud: cloud, Cluster: kube.NewClientFromClientset(fake.NewClientset(), nil), Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := term.Step(context.Background(), cl)
			if err != nil {
				t.Fatal(err)
			}
			if res.Done != tc.wantDone {
				t.Fatalf("step: %+v, want done=%v", res, tc.wantDone)
			}
			if !tc.wantDone {
				cur, err := st.GetNodeClaim(context.Background(), cl.Name)
				if err != nil || cur.IsTrue(ConditionInstanceTerminating) || res.Phase != PhaseInstanceNotVisible || res.RequeueAfter <= 0 {
					t.Fatalf("a claim whose instance is not visible yet: %+v, claim %+v (%v); want it kept, waiting", res, cur, err)
				}
			}
		})
	}
}
