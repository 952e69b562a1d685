package karpenter_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
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

// karpenterAWSInstance launches, as the account's administrator, an
// instance and a launch template tagged exactly as Karpenter's AWS
// provider tags its own (its NodeClaim, NodePool, EC2NodeClass and the
// cluster tags): what a cluster migrating from Karpenter still runs.
func karpenterAWSInstance(t *testing.T, e *cloudtest.Env) (instance, template string) {
	t.Helper()
	admin := ec2.NewFromConfig(e.AWS)
	param, err := ssm.NewFromConfig(e.AWS).GetParameter(e.Ctx, &ssm.GetParameterInput{Name: sdkaws.String(
		"/aws/service/eks/optimized-ami/" + e.Cloud.AWS.Options().KubernetesVersion + "/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		t.Fatal(err)
	}
	cluster := e.Cloud.ClusterName
	tags := []ec2types.Tag{tag("karpenter.sh/nodeclaim", "default-x7k2p"), tag("karpenter.sh/nodepool", "default"),
		tag("karpenter.k8s.aws/ec2nodeclass", "default"), tag("kubernetes.io/cluster/"+cluster, "owned"),
		tag("eks:eks-cluster-name", cluster), tag("karpenter.k8s.aws/cluster", cluster)}
	template = "karpenter.k8s.aws/12345678901234567890"
	if _, err := admin.CreateLaunchTemplate(e.Ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: &template,
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: param.Parameter.Value},
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}}}); err != nil {
		t.Fatal(err)
	}
	out, err := admin.CreateFleet(e.Ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: &template, Version: sdkaws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, AvailabilityZone: sdkaws.String(e.Cloud.Region + "a")}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: sdkaws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}},
	})
	if err != nil || len(out.Instances) == 0 || len(out.Instances[0].InstanceIds) == 0 {
		t.Fatalf("the Karpenter-tagged instance: %v", err)
	}
	return out.Instances[0].InstanceIds[0], template
}

func tag(k, v string) ec2types.Tag {
	return ec2types.Tag{Key: sdkaws.String(k), Value: sdkaws.String(v)}
}
