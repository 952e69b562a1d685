package localcloud_test

import (
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
)

// exampleKey is the key infra/testdata/config's EC2NodeClass "encrypted"
// names.
const exampleKey = "0a1b2c3d-0000-4000-8000-00000000e65e"

// The synthesized stack lets EBS use exactly the customer managed keys its
// EC2NodeClasses name. Through the real launch path with the controller's
// credentials: a class encrypting its root volume under the configured key
// gets a running instance; under a key no class of the configuration
// names, the launch call succeeds but the instance terminates with
// Client.InvalidKMSKey.InvalidState, and the simulator records the
// refused kms:CreateGrant.
func TestEncryptedVolumesNeedTheKeyGrant(t *testing.T) {
	ic := newIAMCloud(t)
	denied := ic.c.ExpectDenials(func(d awssim.Denial) bool { return d.Action == "kms:CreateGrant" })
	const otherKey = "0a1b2c3d-0000-4000-8000-0000000000ff"
	ic.c.AWS.AddKMSKey(awssim.KMSKey{ID: exampleKey})
	ic.c.AWS.AddKMSKey(awssim.KMSKey{ID: otherKey})
	p, it := ic.controllerProvider(t)
	admin := ec2.NewFromConfig(ic.admin)
	launch := func(claim, key string) ec2types.Instance {
		t.Helper()
		nc := roleNodeClass(givenRole)
		nc.Name = "encrypted-" + claim
		nc.Spec.BlockDeviceMappings = []*apis.BlockDeviceMapping{{DeviceName: sdkaws.String("/dev/xvda"), RootVolume: true,
			EBS: &apis.BlockDevice{Encrypted: sdkaws.Bool(true), KMSKeyID: sdkaws.String(key), VolumeType: sdkaws.String("gp3")}}}
		inst, err := p.Launch(ic.ctx, nwaws.LaunchRequest{NodeClaim: roleClaim(claim, nc.Name), NodeClass: nc, InstanceTypes: []*catalog.InstanceType{it}})
		if err != nil {
			t.Fatalf("launch %s: the call succeeds whatever the key (EC2 checks it later): %v", claim, err)
		}
		return settled(t, ic, admin, inst.ID)
	}

	if got := launch("configured-key", exampleKey); got.State.Name != ec2types.InstanceStateNameRunning {
		t.Errorf("instance under the configured key: %s (%s), want running; denials %v", got.State.Name, stateReason(got), ic.c.AWS.Denials())
	}
	if n := denied(); n != 0 {
		t.Fatalf("%d kms:CreateGrant denials under the configured key: %v", n, ic.c.AWS.Denials())
	}
	got := launch("other-key", otherKey)
	if got.State.Name != ec2types.InstanceStateNameTerminated || got.StateReason == nil || sdkaws.ToString(got.StateReason.Code) != "Client.InvalidKMSKey.InvalidState" {
		t.Errorf("instance under a key no class names: %s (%s), want terminated with Client.InvalidKMSKey.InvalidState", got.State.Name, stateReason(got))
	}
	if n := denied(); n != 1 {
		t.Errorf("%d kms:CreateGrant denials under the other key, want 1: %v", n, ic.c.AWS.Denials())
	}
}

// settled waits for an instance to leave pending.
func settled(t *testing.T, ic *iamCloud, c *ec2.Client, id string) ec2types.Instance {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := c.DescribeInstances(ic.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err == nil && len(out.Reservations) == 1 {
			if inst := out.Reservations[0].Instances[0]; inst.State.Name != ec2types.InstanceStateNamePending || time.Now().After(deadline) {
				return inst
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("describe %s: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func stateReason(i ec2types.Instance) string {
	if i.StateReason == nil {
		return "no state reason"
	}
	return sdkaws.ToString(i.StateReason.Message)
}
