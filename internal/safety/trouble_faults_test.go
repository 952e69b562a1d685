package safety_test

import (
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

// The kinds of trouble the test adds, in report order. Lambda's and the
// simulator's own (throttles, cold starts, duplicates, eventual
// consistency, ...) are counted from what they report (report).
const (
	troubleChurn    = "pod churn"
	troubleDeploy   = "deploy (rolling restart)"
	troubleReclaim  = "spot reclaim"
	troubleBurst    = "spot reclaim burst"
	troubleICE      = "ICE wave"
	troubleSLR      = "spot service-linked role missing"
	troubleEC2Error = "EC2 error"
	troubleThrottle = "EC2 throttling burst"
	troubleStall    = "stalled EC2 call"
	troubleLost     = "lost message"
	troubleSpotRole = "AWSServiceRoleForEC2Spot"
)

var troubleKinds = []string{troubleChurn, troubleDeploy, troubleReclaim, troubleBurst, troubleICE, troubleSLR,
	troubleEC2Error, troubleThrottle, troubleStall, troubleLost}

// trouble is one step's random trouble: one draw picks it, whatever the
// state, so a seed's sequence of trouble is the same in every run; lasting
// faults that are due end first.
func (d *troubledDay) trouble(i int) {
	d.endLastingFaults(i)
	switch r := d.rng.Float64(); {
	case r < 0.14:
		d.counts[troubleChurn]++
		d.w.scale(d.rng.IntN(25))
	case r < 0.18:
		d.deploy(i)
	case r < 0.26:
		d.reclaimBurst(2 + d.rng.IntN(3))
	case r < 0.29:
		d.iceWave(i)
	case r < 0.31:
		d.spotRoleMissing(i)
	case r < 0.36:
		d.ec2Errors()
	case r < 0.40:
		d.counts[troubleThrottle]++
		d.w.cloud.AWS.Throttle("ec2", d.ec2Op(), 1+d.rng.IntN(2))
	case r < 0.43:
		d.stall()
	case r < 0.47:
		d.loseMessage()
	}
}

// ec2Errors fails the next one to four calls of a launch, termination or
// tagging with EC2's InternalError, a server error (HTTP 500; EC2 API
// reference, "Error codes": "An internal error has occurred. Retry your
// request"): the SDK's standard retryer makes three attempts, so three or
// four in a row reach the caller. The listings every pass starts with
// (DescribeInstances) get throttling only, within what the retryer
// absorbs: a pass that cannot list fails, by design, and that is not the
// trouble this run is about.
func (d *troubledDay) ec2Errors() {
	d.counts[troubleEC2Error]++
	op := []string{"CreateFleet", "TerminateInstances", "CreateTags"}[d.rng.IntN(3)]
	d.w.cloud.AWS.InjectFault(awssim.Fault{Service: "ec2", Operation: op, Code: "InternalError",
		Message: "An internal error has occurred", Status: http.StatusInternalServerError, Times: 1 + d.rng.IntN(4)})
}

func (d *troubledDay) ec2Op() string {
	ops := []string{"CreateFleet", "TerminateInstances", "DescribeInstances", "CreateTags", "DescribeLaunchTemplates"}
	return ops[d.rng.IntN(len(ops))]
}

// deploy restarts the workload's pods: a rolling update under its PDB.
func (d *troubledDay) deploy(i int) {
	d.counts[troubleDeploy]++
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"nodewright.io/restarted-at":"step-%d"}}}}}`, i)
	if _, err := d.w.cloud.KubeClient.AppsV1().Deployments(d.w.ns).Patch(d.w.ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		d.t.Fatal(err)
	}
}

// reclaimBurst has EC2 reclaim up to n of the stack's running spot
// instances at once, remembering each node for the cordon rule.
func (d *troubledDay) reclaimBurst(n int) {
	claims, err := d.w.st.ListNodeClaims(d.w.ctx)
	if err != nil {
		return
	}
	d.rng.Shuffle(len(claims), func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
	done := 0
	for _, cl := range claims {
		id := cl.Status.InstanceID
		if done == n || cl.Labels[apis.CapacityTypeLabelKey] != apis.CapacityTypeSpot || id == "" || d.warned[id] != nil || !d.nodeExists(cl.Status.NodeName) {
			continue
		}
		if err := d.w.cloud.AWS.ReclaimSpot(id); err != nil {
			continue
		}
		done++
		d.counts[troubleReclaim]++
		d.warned[id] = &spotWarning{node: cl.Status.NodeName, at: time.Now()}
		if cl.Status.NodeName != "" {
			d.w.reclaimedNodes[cl.Status.NodeName] = true
		}
	}
	if done > 1 {
		d.counts[troubleBurst]++
	}
}

func (d *troubledDay) nodeExists(name string) bool {
	if name == "" {
		return false
	}
	_, err := d.w.cloud.KubeClient.CoreV1().Nodes().Get(d.w.ctx, name, metav1.GetOptions{})
	return err == nil
}

// iceWave takes one pool's capacity away for 10 to 40 steps.
func (d *troubledDay) iceWave(i int) {
	p := ec2sim.Pool{InstanceType: []string{"m5.large", "m5.xlarge"}[d.rng.IntN(2)], Zone: d.w.cloud.Region + string(rune('a'+d.rng.IntN(3))),
		CapacityType: []string{"spot", "on-demand"}[d.rng.IntN(2)]}
	if _, on := d.until[p]; on {
		return
	}
	d.counts[troubleICE]++
	d.w.cloud.AWS.EC2().SetCapacity(p, 0)
	d.until[p] = i + 10 + d.rng.IntN(31)
}

// spotRoleMissing deletes the spot service-linked role for 10 to 30
// steps, as in an account that never launched spot before.
func (d *troubledDay) spotRoleMissing(i int) {
	if _, on := d.until[troubleSpotRole]; on {
		return
	}
	d.counts[troubleSLR]++
	d.w.cloud.AWS.SetServiceLinkedRole(troubleSpotRole, false)
	d.until[troubleSpotRole] = i + 10 + d.rng.IntN(21)
}

// endLastingFaults ends the ICE waves and the missing role that are due
// (all of them when i is negative).
func (d *troubledDay) endLastingFaults(i int) {
	for k, end := range d.until {
		if i >= 0 && i < end {
			continue
		}
		switch p := k.(type) {
		case ec2sim.Pool:
			d.w.cloud.AWS.EC2().SetCapacity(p, -1)
		case string:
			d.w.cloud.AWS.SetServiceLinkedRole(p, true)
		}
		delete(d.until, k)
	}
}

// stall holds the next launch or termination past the caller's timeout:
// the function is stopped mid-call, and EC2 acts on the call afterwards,
// as when Lambda ends a function whose request is already on its way.
func (d *troubledDay) stall() {
	d.counts[troubleStall]++
	op := []string{"CreateFleet", "TerminateInstances"}[d.rng.IntN(2)]
	d.w.cloud.AWS.InjectFault(awssim.Fault{Service: "ec2", Operation: op, Latency: stallLatency, Times: 1})
}

// loseMessage makes the next message a function or the webhook sends
// fail on the way: SQS answers InternalFailure (HTTP 500, AWS's common
// server error) three times in a row, which the SDK's standard retryer
// (three attempts) gives up after. The sender goes on without it (the
// webhook fails open, the provisioner's follow-up and the lifecycle's
// requeue are redone by the schedules), which is how a message is lost:
// SQS itself loses none it acknowledged.
func (d *troubledDay) loseMessage() {
	d.counts[troubleLost]++
	op := []string{"SendMessage", "SendMessageBatch"}[d.rng.IntN(2)]
	d.w.cloud.AWS.InjectFault(awssim.Fault{Service: "sqs", Operation: op, Code: "InternalFailure",
		Message: "We encountered an internal error. Please try again.", Status: http.StatusInternalServerError, Times: 3})
}
