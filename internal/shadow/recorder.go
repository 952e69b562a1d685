package shadow

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/decision"
	"github.com/nodewright/nodewright/internal/kube"
)

// reasonNominated is the provisioner's nomination event reason
// (provisioning.ReasonNominated; shadow does not import the controller).
const reasonNominated = "Nominated"

// Recorder collects what one invocation's provisioning passes would have
// launched, and Flush writes it as one decision.Launch record.
type Recorder struct {
	Store    decision.Writer
	Function string
	Now      func() time.Time

	mu       sync.Mutex
	snapAt   time.Time
	pendings map[string]decision.Pod
	claims   []decision.Claim
	byName   map[string]int
	firstAt  time.Time
}

func (r *Recorder) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// pending notes a snapshot's pending pods and when it was taken.
func (r *Recorder) pending(snap *kube.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.claims) == 0 {
		r.snapAt = r.now()
	}
	if r.pendings == nil {
		r.pendings = map[string]decision.Pod{}
	}
	for _, p := range snap.PendingPods {
		created := p.CreationTimestamp.Time
		r.pendings[p.Namespace+"/"+p.Name] = decision.Pod{Pod: p.Namespace + "/" + p.Name, Created: created, Seconds: r.now().Sub(created).Seconds()}
	}
}

// launched notes a claim the pass would have launched.
func (r *Recorder) launched(cl *apis.NodeClaim, inst nwaws.Instance, price float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName = map[string]int{}
	}
	if len(r.claims) == 0 {
		r.firstAt = r.now()
	}
	c := decision.Claim{Node: decision.Node{Name: cl.Name, NodePool: cl.NodePoolName(), InstanceType: inst.Type, Zone: inst.Zone, CapacityType: inst.CapacityType, Price: price}}
	if i, ok := r.byName[cl.Name]; ok {
		r.claims[i] = c
		return
	}
	r.byName[cl.Name] = len(r.claims)
	r.claims = append(r.claims, c)
}

// nominated attaches a pod to the claim a nomination message names
// ("nodeclaim/<name> (...)"); nominations onto existing nodes are ignored.
func (r *Recorder) nominated(p *corev1.Pod, message string) {
	_, rest, ok := strings.Cut(message, "nodeclaim/")
	if !ok {
		return
	}
	name, _, _ := strings.Cut(rest, " ")
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.byName[name]; ok {
		r.claims[i].Pods = append(r.claims[i].Pods, p.Namespace+"/"+p.Name)
	}
}

// Flush writes the would-launch record of what was collected since the
// last Flush (nothing when no claim was planned) and starts over.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	rec := decision.Launch{At: r.now(), Function: r.Function, Claims: r.claims}
	if !r.firstAt.IsZero() && !r.snapAt.IsZero() {
		rec.DecisionSeconds = r.firstAt.Sub(r.snapAt).Seconds()
	}
	for _, p := range r.pendings {
		rec.Pending = append(rec.Pending, p)
	}
	r.claims, r.byName, r.pendings, r.firstAt, r.snapAt = nil, nil, nil, time.Time{}, time.Time{}
	r.mu.Unlock()
	if len(rec.Claims) == 0 {
		return nil
	}
	sort.Slice(rec.Pending, func(i, j int) bool { return rec.Pending[i].Pod < rec.Pending[j].Pod })
	return decision.Put(ctx, r.Store, decision.KindLaunch, r.Function, rec.At, rec)
}
