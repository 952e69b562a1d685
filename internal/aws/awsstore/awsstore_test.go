package awsstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/dynalite"
	"github.com/nodewright/nodewright/internal/store"
)

var dynaliteEndpoint string

func TestMain(m *testing.M) { dynalite.Main(m, &dynaliteEndpoint) }

func newStore(t *testing.T, ctx context.Context) *store.Store {
	t.Helper()
	db := dynalite.Client(t, dynaliteEndpoint)
	return cloudtest.NewTable(ctx, t, db, fmt.Sprintf("awsstore-%d", time.Now().UnixNano()))
}

func TestPricesRoundTrip(t *testing.T) {
	ctx := context.Background()
	p := awsstore.Prices{Store: newStore(t, ctx)}
	if got, err := p.LoadPrices(ctx, "us-west-2"); err != nil || got != nil {
		t.Fatalf("empty store: %v %+v", err, got)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	in := &nwaws.PriceSnapshot{Region: "us-west-2", FetchedAt: at, OnDemand: map[string]float64{"m5.large": 0.096},
		OnDemandSource: catalog.PriceSourcePricingAPI, Spot: map[string]map[string]float64{"m5.large": {"us-west-2a": 0.035}}}
	if err := p.SavePrices(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err := p.LoadPrices(ctx, "us-west-2")
	if err != nil || got == nil || !got.FetchedAt.Equal(at) || got.OnDemand["m5.large"] != 0.096 || got.Spot["m5.large"]["us-west-2a"] != 0.035 {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	if got, _ := p.LoadPrices(ctx, "us-east-1"); got != nil {
		t.Errorf("other region returned %+v", got)
	}
	if err := p.SavePrices(ctx, &nwaws.PriceSnapshot{}); err == nil {
		t.Error("snapshot without region accepted")
	}
}

// TestICESharedBetweenFunctions: a capacity error one function hits keeps
// another function (its own Provider, its own process memory) off that
// offering, through DynamoDB alone.
func TestICESharedBetweenFunctions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := newStore(t, ctx)
	sim, err := awssim.New(awssim.Options{ClusterName: "demo", KubernetesVersion: "1.33", Region: "us-west-2", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	sim.SetEKSCluster("https://127.0.0.1:6443", []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), "1.33")
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": sim.URL(), "AWS_ACCESS_KEY_ID": awssim.DefaultAccessKeyID, "AWS_SECRET_ACCESS_KEY": awssim.DefaultSecretAccessKey,
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	provider := func() *nwaws.Provider {
		clients, _, err := nwaws.NewClients(ctx, "us-west-2")
		if err != nil {
			t.Fatal(err)
		}
		p, err := nwaws.New(nwaws.Options{ClusterName: "demo", Region: "us-west-2", Owner: "awsstore-tests"}, clients,
			nwaws.NewICECache(awsstore.ICE{Store: st}, 3*time.Minute, nil))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := provider(), provider()
	cat, err := a.Catalog(ctx, awsstore.Prices{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	get := func(n string) *catalog.InstanceType {
		it, ok := cat.Get(n)
		if !ok {
			t.Fatalf("no %s", n)
		}
		return it
	}
	for _, z := range sim.EC2().Config().Catalog.Zones() {
		sim.EC2().SetCapacity(ec2sim.Pool{InstanceType: "c5.large", Zone: z, CapacityType: "on-demand"}, 0)
	}
	nc := &apis.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apis.EC2NodeClassSpec{
			SubnetSelectorTerms:        []apis.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
			SecurityGroupSelectorTerms: []apis.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
			AMISelectorTerms:           []apis.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "NodeRole",
		},
	}
	claim := func(name string) *apis.NodeClaim {
		return &apis.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apis.NodePoolLabelKey: "default"}},
			Spec: apis.NodeClaimSpec{Requirements: []apis.NodeSelectorRequirementWithMinValues{
				{Key: "karpenter.sh/capacity-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			}},
		}
	}
	// Function A: only c5.large allowed -> insufficient capacity, recorded in DynamoDB.
	if _, err := a.Launch(ctx, nwaws.LaunchRequest{NodeClaim: claim("a-1"), NodeClass: nc, InstanceTypes: []*catalog.InstanceType{get("c5.large")}}); !errors.Is(err, nwaws.ErrInsufficientCapacity) {
		t.Fatalf("function A: want insufficient capacity, got %v", err)
	}
	entries, err := st.UnavailableOfferings(ctx)
	if err != nil || len(entries) != len(sim.EC2().Config().Catalog.Zones()) {
		t.Fatalf("ICE entries in DynamoDB: %v %+v", err, entries)
	}
	// Function B never saw the error; its first launch already skips c5.large.
	before := len(sim.Calls("ec2", "CreateFleet"))
	inst, err := b.Launch(ctx, nwaws.LaunchRequest{NodeClaim: claim("b-1"), NodeClass: nc, InstanceTypes: []*catalog.InstanceType{get("c5.large"), get("m5.large")}})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Type != "m5.large" || len(sim.Calls("ec2", "CreateFleet")) != before+1 {
		t.Errorf("function B launched %s with %d fleet calls", inst.Type, len(sim.Calls("ec2", "CreateFleet"))-before)
	}
	// The price snapshot function A fetched is cached for B.
	if got, err := (awsstore.Prices{Store: st}).LoadPrices(ctx, "us-west-2"); err != nil || got == nil || got.OnDemand["m5.large"] == 0 {
		t.Errorf("price cache: %v %+v", err, got)
	}
}
