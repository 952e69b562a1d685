package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata"
)

// Config configures an emulator.
type Config struct {
	Client            kubernetes.Interface
	Region            string
	KubernetesVersion string
	// TypeInfo returns the instance type's description (capacity).
	TypeInfo func(instanceType string) (ec2types.InstanceTypeInfo, bool)
	// Image returns an image's description (its platform); nil: unknown.
	Image func(imageID string) (ec2types.Image, bool)
	// After runs f after d of simulated time.
	After func(d time.Duration, f func())
	// RegistrationDelay is the time from running to Node registration.
	RegistrationDelay time.Duration
	// KeepTerminatedNodes leaves Nodes of terminated instances in place
	// (NotReady) instead of deleting them as the AWS cloud controller does.
	KeepTerminatedNodes bool
	// PodENI is security groups for pods turned on (ENABLE_POD_ENI on the
	// VPC CNI): nodes of ENI-trunking types get a trunk interface and
	// vpc.amazonaws.com/pod-eni (AttachTrunk).
	PodENI bool
	Logger *slog.Logger
}

// Event is one thing the emulator did, for tests and logs.
type Event struct {
	InstanceID, NodeName, Action string // registered, stopped-heartbeat, deleted, failed
	Err                          error
}

// Emulator follows instance transitions. Safe for concurrent use.
type Emulator struct {
	cfg    Config
	mu     sync.Mutex
	states map[string]ec2types.InstanceStateName
	events []Event
}

// New creates an emulator.
func New(cfg Config) *Emulator {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.After == nil {
		cfg.After = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	return &Emulator{cfg: cfg, states: map[string]ec2types.InstanceStateName{}}
}

// Events returns what the emulator has done so far.
func (e *Emulator) Events() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.events...)
}

func (e *Emulator) record(ev Event) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
	if ev.Err != nil {
		e.cfg.Logger.Warn("kubelet emulation", "instance", ev.InstanceID, "node", ev.NodeName, "action", ev.Action, "error", ev.Err)
	}
}

// Observe reacts to one instance state change.
func (e *Emulator) Observe(inst ec2types.Instance, to ec2types.InstanceStateName, userData string) {
	id := aws.ToString(inst.InstanceId)
	e.mu.Lock()
	e.states[id] = to
	e.mu.Unlock()
	switch to {
	case ec2types.InstanceStateNameRunning:
		e.cfg.After(e.cfg.RegistrationDelay, func() { e.register(inst, userData) })
	case ec2types.InstanceStateNameShuttingDown, ec2types.InstanceStateNameStopping:
		e.stopHeartbeat(id, aws.ToString(inst.PrivateDnsName))
	case ec2types.InstanceStateNameTerminated:
		e.stopHeartbeat(id, aws.ToString(inst.PrivateDnsName))
		if !e.cfg.KeepTerminatedNodes {
			e.deleteNode(id, aws.ToString(inst.PrivateDnsName))
		}
	}
}

func (e *Emulator) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// statusRetry spaces the status posts of a registration that keeps
// conflicting: eight tries, 10 ms doubling (about 2.5 s in all).
func statusRetry() wait.Backoff {
	return wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1}
}

func (e *Emulator) register(inst ec2types.Instance, userData string) {
	id := aws.ToString(inst.InstanceId)
	e.mu.Lock()
	state := e.states[id]
	e.mu.Unlock()
	if state != ec2types.InstanceStateNameRunning {
		return // the instance went away before its kubelet started
	}
	fail := func(err error) {
		e.record(Event{InstanceID: id, NodeName: aws.ToString(inst.PrivateDnsName), Action: "failed", Err: err})
	}
	boot, err := userdata.ParseBase64(userData)
	if err != nil {
		fail(fmt.Errorf("bootstrap: %w", err))
		return
	}
	info, ok := e.cfg.TypeInfo(string(inst.InstanceType))
	if !ok {
		fail(fmt.Errorf("unknown instance type %s", inst.InstanceType))
		return
	}
	var img ec2types.Image
	if e.cfg.Image != nil {
		img, _ = e.cfg.Image(aws.ToString(inst.ImageId))
	}
	node, err := BuildNode(inst, img, info, boot, e.cfg.Region, e.cfg.KubernetesVersion)
	if err != nil {
		fail(err)
		return
	}
	if e.cfg.PodENI {
		AttachTrunk(node)
	}
	ctx, cancel := e.ctx()
	defer cancel()
	status := node.Status
	created, err := e.cfg.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = e.cfg.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	}
	if err != nil {
		fail(fmt.Errorf("register node %s: %w", node.Name, err))
		return
	}
	// Status is a subresource: kubelet posts it separately, racing KWOK's
	// own status updates and the lifecycle's label/taint patches, hence the
	// re-read and retry on conflict (statusRetry: a busy registration
	// outlasts client-go's DefaultRetry of 5 x 10 ms).
	err = retry.RetryOnConflict(statusRetry(), func() error {
		if created == nil {
			if created, err = e.cfg.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		created.Status.Capacity, created.Status.Allocatable = status.Capacity, status.Allocatable
		created.Status.Addresses, created.Status.NodeInfo = status.Addresses, status.NodeInfo
		_, err := e.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		created = nil
		return err
	})
	if err != nil {
		fail(fmt.Errorf("post status of node %s: %w", node.Name, err))
		return
	}
	e.record(Event{InstanceID: id, NodeName: node.Name, Action: "registered"})
}

// stopHeartbeat takes the Node away from KWOK and deletes its lease, so the
// node lifecycle controller sees a kubelet that stopped posting status.
func (e *Emulator) stopHeartbeat(id, name string) {
	if name == "" {
		return
	}
	ctx, cancel := e.ctx()
	defer cancel()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, KWOKAnnotation))
	_, err := e.cfg.Client.CoreV1().Nodes().Patch(ctx, name, k8stypes.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		e.record(Event{InstanceID: id, NodeName: name, Action: "failed", Err: fmt.Errorf("stop heartbeat of %s: %w", name, err)})
		return
	}
	if err := e.cfg.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		e.record(Event{InstanceID: id, NodeName: name, Action: "failed", Err: fmt.Errorf("delete lease of %s: %w", name, err)})
		return
	}
	e.record(Event{InstanceID: id, NodeName: name, Action: "stopped-heartbeat"})
}

// deleteNode is what the AWS cloud controller does for a terminated
// instance; finalizers (e.g. Karpenter's) still hold the Node until removed.
func (e *Emulator) deleteNode(id, name string) {
	if name == "" {
		return
	}
	ctx, cancel := e.ctx()
	defer cancel()
	err := e.cfg.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.record(Event{InstanceID: id, NodeName: name, Action: "failed", Err: fmt.Errorf("delete node %s: %w", name, err)})
		return
	}
	if err == nil {
		e.record(Event{InstanceID: id, NodeName: name, Action: "deleted"})
	}
}
