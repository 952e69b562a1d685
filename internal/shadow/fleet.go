package shadow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/decision"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/internal/store"
)

// FleetDeps are what the fleet pass reads, and the table it records in.
type FleetDeps struct {
	Cluster interface {
		Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error)
	}
	Store interface {
		ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error)
		PutDecision(ctx context.Context, d store.Decision) error
	}
	Catalog     func(ctx context.Context) (*catalog.Catalog, error)
	Unavailable func(ctx context.Context) (map[scheduling.OfferingKey]bool, error)
	Config      *apis.Config
	Settings    disruption.Settings
	Log         *slog.Logger
	Now         func() time.Time
}

// Fleet is the disruption function in shadow mode: disruption.Decide over
// every node, recorded as a decision.Fleet, never executed.
type Fleet struct {
	d FleetDeps

	mu sync.Mutex
	// last is the previous pass's time: pods scheduled since are reported.
	last time.Time
}

// NewFleet checks the dependencies.
func NewFleet(d FleetDeps) (*Fleet, error) {
	if d.Cluster == nil || d.Store == nil || d.Catalog == nil || d.Config == nil {
		return nil, errors.New("shadow fleet: cluster, store, catalog and configuration are required")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Fleet{d: d}, nil
}

// Handle runs one pass, whatever the invocation (schedule tick or queue
// message) carried.
func (f *Fleet) Handle(ctx context.Context, _ json.RawMessage) (any, error) {
	return f.Pass(ctx)
}

// Pass decides and records; it changes nothing.
func (f *Fleet) Pass(ctx context.Context) (*decision.Fleet, error) {
	var owner map[string]string
	r := disruption.Reads{Cluster: f.d.Cluster, Store: f.d.Store, Catalog: f.d.Catalog, Unavailable: f.d.Unavailable, Config: f.d.Config, Log: f.d.Log, Policy: f.d.Settings.Policy}
	cl, snap, err := r.Read(ctx, kube.SnapshotOptions{}, func(snap *kube.Snapshot, claims []*apis.NodeClaim) []*apis.NodeClaim {
		var foreign []*apis.NodeClaim
		foreign, owner = foreignClaims(snap.Nodes, claims, f.d.Config)
		return foreign
	})
	if err != nil {
		return nil, fmt.Errorf("shadow fleet: %w", err)
	}
	now := f.d.Now()
	v := &disruption.View{Cluster: cl, PDBs: snap.PDBs, Now: now, Settings: f.d.Settings}
	dec, err := disruption.Decide(ctx, v)
	if err != nil {
		return nil, fmt.Errorf("shadow fleet: decide: %w", err)
	}
	rec := &decision.Fleet{At: now, Nodes: len(snap.Nodes), Opportunity: opportunity(dec.Command, owner)}
	for _, o := range owner {
		if o != OwnerNodewright {
			rec.ForeignNodes++
		}
	}
	rec.CostPerHour, rec.PlanCostPerHour = f.costs(ctx, cl, snap.Nodes)
	for _, fd := range dec.Findings {
		rec.Blocked = append(rec.Blocked, decision.Blocked{Node: fd.Node, Reason: fd.Text})
	}
	for _, w := range f.d.Config.Warnings {
		rec.NotHonoured = append(rec.NotHonoured, w.String())
	}
	rec.Scheduled = f.scheduled(snap, now)
	f.d.Log.InfoContext(ctx, "shadow fleet pass", "nodes", rec.Nodes, "foreign-nodes", rec.ForeignNodes, "cost", rec.CostPerHour,
		"plan-cost", rec.PlanCostPerHour, "opportunity", rec.Opportunity != nil, "blocked", len(rec.Blocked))
	if err := decision.Put(ctx, f.d.Store, decision.KindFleet, "disruption", now, rec); err != nil {
		return rec, err
	}
	return rec, nil
}

// costs prices every node by its labels, and nodewright's plan for the
// pods they run: each pool's pods solved from scratch (the pool's cost as
// it is when they cannot all be placed), plus the nodes no pool takes, as
// they are. Pending pods are left out: they run nowhere yet, and a node
// bought for them must not count as the running pods' cost.
func (f *Fleet) costs(ctx context.Context, cl *state.Cluster, nodes []*corev1.Node) (actual, plan float64) {
	running := *cl
	running.Pending = nil
	cl = &running
	pooled := 0.0
	for _, n := range nodes {
		price, _ := cl.Catalog.NodePrice(n.Labels[catalog.LabelInstanceType], n.Labels[catalog.LabelTopologyZone], n.Labels[apis.CapacityTypeLabelKey])
		actual += price
	}
	for _, np := range f.d.Config.NodePools {
		ideal, current, ok, err := disruption.IdealCost(ctx, cl, np.Name)
		if err != nil {
			f.d.Log.WarnContext(ctx, "shadow fleet: planning a pool from scratch", "nodepool", np.Name, "error", err)
		}
		pooled += current
		if ok {
			plan += ideal
		} else {
			plan += current
		}
	}
	return actual, plan + (actual - pooled)
}

// scheduled lists the bound pods whose PodScheduled condition turned true
// since the previous pass (the last two schedule periods on the first).
func (f *Fleet) scheduled(snap *kube.Snapshot, now time.Time) []decision.Pod {
	f.mu.Lock()
	since := f.last
	f.last = now
	f.mu.Unlock()
	if since.IsZero() {
		since = now.Add(-2 * time.Minute)
	}
	var out []decision.Pod
	for _, pods := range snap.PodsByNode {
		for _, p := range pods {
			for _, c := range p.Status.Conditions {
				if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionTrue || !c.LastTransitionTime.After(since) {
					continue
				}
				out = append(out, decision.Pod{Pod: p.Namespace + "/" + p.Name, Created: p.CreationTimestamp.Time,
					Seconds: c.LastTransitionTime.Sub(p.CreationTimestamp.Time).Seconds()})
			}
		}
	}
	return out
}

// opportunity is what the report says of a command.
func opportunity(cmd *disruption.Command, owner map[string]string) *decision.Opportunity {
	if cmd == nil {
		return nil
	}
	o := &decision.Opportunity{Method: cmd.Method, Action: cmd.Action(), Message: cmd.Message}
	for _, c := range cmd.Candidates {
		o.Nodes = append(o.Nodes, decision.Node{Name: c.Node, NodePool: c.NodePool, InstanceType: c.InstanceType, CapacityType: c.CapacityType,
			Price: c.Price, Owner: owner[c.Node]})
		o.SavingsPerHr += c.Price
	}
	for _, r := range cmd.Replacements {
		o.Replacements = append(o.Replacements, decision.Node{NodePool: r.NodePool, InstanceType: r.InstanceType, Zone: r.Zone,
			CapacityType: r.CapacityType, Price: r.Price})
		o.SavingsPerHr -= r.Price
	}
	return o
}
