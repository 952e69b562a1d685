package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/apis"
)

// scenario scales the Deployment up and down and measures.
func (d *run) scenario(ctx context.Context) (Result, error) {
	res := Result{Pods: d.o.Replicas, InstanceTypes: map[string]int{}}
	ns := d.o.Namespace
	if err := d.cloud.Plane.WaitServiceAccount(ctx, ns); err != nil {
		return res, fmt.Errorf("namespace %s: %w", ns, err)
	}
	dep, err := inflateDeployment()
	if err != nil {
		return res, err
	}
	dep.Namespace = ns
	deps := d.kc.AppsV1().Deployments(ns)
	if _, err := deps.Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return res, fmt.Errorf("create deployment %s/inflate: %w", ns, err)
	}
	d.closers = append(d.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = deps.Delete(cctx, "inflate", metav1.DeleteOptions{})
	})

	obs := newObserver(d, ns)
	obsCtx, obsStop := context.WithCancel(ctx)
	var obsWG sync.WaitGroup
	obsWG.Go(func() { obs.loop(obsCtx) })
	defer func() { obsStop(); obsWG.Wait() }()

	if err := d.scaleUp(ctx, obs, dep, &res); err != nil {
		return res, err
	}
	if err := d.scaleDown(ctx, obs, dep, &res); err != nil {
		return res, err
	}
	res.Faults, res.Lambda = d.sys.LambdaOptions().Rates(), d.sys.LambdaStats()
	d.tl.Printf("Lambda, SQS and EventBridge faults (seed %d): %s; %s", d.sys.LambdaOptions().Seed, res.Faults, res.Lambda)
	res.IAM, res.IAMDenied = "off", 0
	if d.cloud.IAMEnforced() {
		res.IAM, res.IAMDenied = "enforced", len(d.cloud.IAMDenials())
	}
	// A refused call makes a function fail too; the policy's reason is the
	// more useful error.
	if err := d.checkIAM(); err != nil {
		return res, err
	}
	if err := d.sys.Err(); err != nil {
		return res, fmt.Errorf("the functions reported errors during the demo: %w", err)
	}
	return res, d.checkRights()
}

// scaleUp scales the inflate Deployment to the replicas (or creates the
// burst of pods), waits for every pod Running and measures.
func (d *run) scaleUp(ctx context.Context, obs *observer, dep *appsv1.Deployment, res *Result) error {
	fleetBefore := len(d.cloud.AWS.Calls("ec2", "CreateFleet"))
	upStart := time.Now()
	if d.o.Burst {
		if err := createPods(ctx, d.kc, dep, d.o.Replicas); err != nil {
			return err
		}
		res.CreateSpread = time.Since(upStart)
		d.tl.Printf("created %d inflate pods at once in %.2fs (pause image, 1 CPU / 1Gi each)", d.o.Replicas, res.CreateSpread.Seconds())
	} else {
		if err := scale(ctx, d.kc.AppsV1().Deployments(dep.Namespace), dep.Name, int32(d.o.Replicas)); err != nil {
			return err
		}
		d.tl.Printf("kubectl scale deployment/inflate --replicas=%d (pause image, 1 CPU / 1Gi each)", d.o.Replicas)
	}
	err := d.waitFor(ctx, "every pod Running", func() (bool, error) {
		c := obs.pods()
		return c.Running == d.o.Replicas && c.Total == d.o.Replicas, nil
	})
	if err != nil {
		return err
	}
	res.TimeToRunning = time.Since(upStart)
	res.Running = obs.pods().Running
	d.measureScaleUp(ctx, obs, fleetBefore, res)
	return nil
}

// measureScaleUp records the webhook's share of the scale-up and what runs
// once every pod is Running.
func (d *run) measureScaleUp(ctx context.Context, obs *observer, fleetBefore int, res *Result) {
	if fleets := d.cloud.AWS.Calls("ec2", "CreateFleet"); len(fleets) > fleetBefore {
		at := fleets[fleetBefore].Time
		var first, last time.Time
		res.WebhookCalls, first, last = d.sys.WebhookStats(at)
		if res.WebhookCalls > 0 && !last.IsZero() {
			res.WebhookToFleet = at.Sub(first)
			res.LastVerdictToFleet = at.Sub(last)
		}
	}
	if res.WebhookCalls == 0 {
		d.tl.Printf("WARNING the API server never called the webhook; the schedule provisioned")
	}
	live := obs.liveInstances()
	res.Nodes = len(live)
	for _, in := range live {
		res.CostPerHour += in.Price
		res.InstanceTypes[in.Type]++
	}
	if claims, err := d.sys.Provisioner.Store.ListNodeClaims(ctx); err == nil {
		res.NodeClaims = len(claims)
	}
	d.tl.Printf("all %d pods Running after %.1fs on %d nodes (%s), $%.4f/h; first webhook call -> CreateFleet %s (last Unschedulable verdict before it -> CreateFleet %s); %d AdmissionReviews",
		res.Running, res.TimeToRunning.Seconds(), res.Nodes, typesString(res.InstanceTypes), res.CostPerHour,
		res.WebhookToFleet.Round(time.Millisecond), res.LastVerdictToFleet.Round(time.Millisecond), res.WebhookCalls)
}

// scaleDown removes the pods and waits until every node is drained and
// terminated and every NodeClaim is gone.
func (d *run) scaleDown(ctx context.Context, obs *observer, dep *appsv1.Deployment, res *Result) error {
	downStart := time.Now()
	if d.o.Burst {
		err := d.kc.CoreV1().Pods(dep.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=inflate"})
		if err != nil {
			return fmt.Errorf("delete the inflate pods: %w", err)
		}
		d.tl.Printf("deleted the %d pods; %s", d.o.Replicas, d.scaleDownHow())
	} else {
		if err := scale(ctx, d.kc.AppsV1().Deployments(dep.Namespace), dep.Name, 0); err != nil {
			return err
		}
		d.tl.Printf("kubectl scale deployment/inflate --replicas=0; %s", d.scaleDownHow())
	}
	err := d.waitFor(ctx, "every node drained and terminated", func() (bool, error) {
		if c := obs.pods(); c.Total != 0 {
			return false, nil
		}
		if len(obs.liveInstances()) != 0 || obs.nodeCount() != 0 {
			return false, nil
		}
		claims, err := d.sys.Provisioner.Store.ListNodeClaims(ctx)
		if err != nil {
			return false, nil // transient; the deadline reports a lasting failure
		}
		return len(claims) == 0, nil
	})
	if err != nil {
		return err
	}
	res.ScaleDown = time.Since(downStart)
	d.tl.Printf("scaled down in %.1fs: no pods, no nodes, no NodeClaims, every instance terminated", res.ScaleDown.Seconds())
	return nil
}

// checkIAM reports the calls the stack's IAM policy refused the functions,
// each with its decoded authorization message: any is a permission the
// deployed stack would lack in AWS.
func (d *run) checkIAM() error {
	if !d.cloud.IAMEnforced() {
		d.tl.Printf("WARNING IAM is not enforced: the functions' AWS calls were not checked against the stack's policy")
		return nil
	}
	denied := d.cloud.IAMDenials()
	if len(denied) > 0 {
		reasons := make([]string, 0, len(denied))
		for _, den := range denied {
			reasons = append(reasons, den.String())
		}
		return fmt.Errorf("the stack's IAM policy refused the functions %d calls:\n%s", len(denied), strings.Join(reasons, "\n"))
	}
	used, total := 0, 0
	for _, u := range d.cloud.AWS.StatementUses() {
		total++
		if u.Allowed > 0 {
			used++
		}
	}
	d.tl.Printf("every AWS call was evaluated under the synthesized stack's IAM policy for its function's role: none refused (%d of the roles' %d statements used)", used, total)
	return nil
}

// checkRights reports what the API server refused the functions: they run
// with the controllers' RBAC rights only (internal/access), as the stack
// gives them in EKS, so any refusal is a right the stack would lack.
func (d *run) checkRights() error {
	denied, err := d.cloud.Forbidden()
	if err != nil {
		return err
	}
	if len(denied) > 0 {
		return fmt.Errorf("the API server refused the functions %d kinds of request (RBAC): %s", len(denied), strings.Join(denied, "; "))
	}
	d.tl.Printf("the functions ran as group %s with only its ClusterRole's rights: the API server refused them nothing", access.ControllerGroup)
	return nil
}

func (d *run) scaleDownHow() string {
	if d.o.ConsolidationPolicy == string(apis.ConsolidationPolicyWhenEmpty) {
		return fmt.Sprintf("the lifecycle (or disruption) function deletes each empty node after consolidateAfter %s", ConsolidateAfter)
	}
	return fmt.Sprintf("the disruption function consolidates empty nodes after consolidateAfter %s", ConsolidateAfter)
}

// waitFor polls cond until it holds, the phase times out or ctx ends.
func (d *run) waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(d.o.Timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %s waiting for %s", d.o.Timeout, what)
			if e := d.sys.Err(); e != nil {
				return fmt.Errorf("%s; function errors: %w", msg, e)
			}
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func scale(ctx context.Context, deps interface {
	UpdateScale(context.Context, string, *autoscalingv1.Scale, metav1.UpdateOptions) (*autoscalingv1.Scale, error)
	GetScale(context.Context, string, metav1.GetOptions) (*autoscalingv1.Scale, error)
}, name string, replicas int32) error {
	for attempt := 0; ; attempt++ {
		sc, err := deps.GetScale(ctx, name, metav1.GetOptions{})
		if err == nil {
			sc.Spec.Replicas = replicas
			_, err = deps.UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
		}
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 5 {
			return fmt.Errorf("scale deployment %s to %d: %w", name, replicas, err)
		}
	}
}

// createPods creates n pods from the Deployment's template concurrently.
func createPods(ctx context.Context, kc kubernetes.Interface, dep *appsv1.Deployment, n int) error {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < n; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("inflate-burst-%04d", i), Namespace: dep.Namespace, Labels: dep.Spec.Template.Labels},
			Spec:       *dep.Spec.Template.Spec.DeepCopy(),
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := kc.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("create pod %s: %w", pod.Name, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return firstErr
}

func typesString(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%dx %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}
