package awssim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	authv1 "k8s.io/api/authentication/v1"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

func TestDescribeCatalogOperations(t *testing.T) {
	// The project's embedded catalog (default when no catalog is given).
	s, cfg := newTestServer(t, func(o *Options) { o.Catalog = nil })
	c := ec2.NewFromConfig(cfg)
	n := 0
	pages := allPages[*ec2.DescribeInstanceTypesOutput, ec2.Options](t, ec2.NewDescribeInstanceTypesPaginator(c, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(20)}))
	for _, pg := range pages {
		n += len(pg.InstanceTypes)
		for _, it := range pg.InstanceTypes {
			if it.VCpuInfo == nil || it.MemoryInfo == nil || it.ProcessorInfo == nil || len(it.ProcessorInfo.SupportedArchitectures) == 0 {
				t.Fatalf("%s lacks vcpu/memory/arch: %+v", it.InstanceType, it)
			}
		}
	}
	if n != len(s.EC2().Config().Catalog.Types) || len(pages) < 2 {
		t.Fatalf("described %d types in %d pages, catalog has %d", n, len(pages), len(s.EC2().Config().Catalog.Types))
	}
	arm, err := c.DescribeInstanceTypes(ctx(t), &ec2.DescribeInstanceTypesInput{Filters: []types.Filter{{Name: aws.String("processor-info.supported-architecture"), Values: []string{"arm64"}}, {Name: aws.String("instance-type"), Values: []string{"m*"}}}})
	if err != nil || len(arm.InstanceTypes) == 0 {
		t.Fatalf("arm64 filter: %v %v", arm, err)
	}
	for _, it := range arm.InstanceTypes {
		if it.ProcessorInfo.SupportedArchitectures[0] != types.ArchitectureTypeArm64 || !strings.HasPrefix(string(it.InstanceType), "m") {
			t.Fatalf("filter leaked %s", it.InstanceType)
		}
	}
	offs, err := c.DescribeInstanceTypeOfferings(ctx(t), &ec2.DescribeInstanceTypeOfferingsInput{LocationType: types.LocationTypeAvailabilityZone,
		Filters: []types.Filter{{Name: aws.String("instance-type"), Values: []string{"m5.large"}}}})
	if err != nil || len(offs.InstanceTypeOfferings) < 2 || offs.InstanceTypeOfferings[0].LocationType != types.LocationTypeAvailabilityZone {
		t.Fatalf("offerings %+v %v", offs, err)
	}
	spot, err := c.DescribeSpotPriceHistory(ctx(t), &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []types.InstanceType{"m5.large"}, ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(time.Now())})
	if err != nil || len(spot.SpotPriceHistory) != len(offs.InstanceTypeOfferings) {
		t.Fatalf("spot %+v %v", spot, err)
	}
	od, _ := s.EC2().OnDemandPrice("m5.large")
	if sp, _ := s.EC2().SpotPrice("m5.large", *spot.SpotPriceHistory[0].AvailabilityZone); *spot.SpotPriceHistory[0].SpotPrice == "" || sp >= od {
		t.Fatalf("spot %v not below on-demand %v", sp, od)
	}
	azs, err := c.DescribeAvailabilityZones(ctx(t), &ec2.DescribeAvailabilityZonesInput{})
	if err != nil || len(azs.AvailabilityZones) < 3 || *azs.AvailabilityZones[0].ZoneId == "" {
		t.Fatalf("zones %+v %v", azs, err)
	}
}

func TestImagesSSMAndDrift(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c, sc := ec2.NewFromConfig(cfg), ssm.NewFromConfig(cfg)
	tests := []struct{ param, namePrefix string }{
		{"/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id", "amazon-eks-node-al2023-x86_64-standard-1.36-v2026"},
		{"/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/standard/recommended/image_id", "amazon-eks-node-al2023-arm64-standard-1.36-v"},
		{"/aws/service/eks/optimized-ami/1.36/amazon-linux-2/recommended/image_id", "amazon-eks-node-1.36-v"},
		{"/aws/service/eks/optimized-ami/1.36/amazon-linux-2-arm64/recommended/image_id", "amazon-eks-arm64-node-1.36-v"},
		{"/aws/service/eks/optimized-ami/1.36/amazon-linux-2-gpu/recommended/image_id", "amazon-eks-gpu-node-1.36-v"},
		{"/aws/service/bottlerocket/aws-k8s-1.36/x86_64/latest/image_id", "bottlerocket-aws-k8s-1.36-x86_64-v1.50.0"},
		{"/aws/service/bottlerocket/aws-k8s-1.36-nvidia/x86_64/latest/image_id", "bottlerocket-aws-k8s-1.36-nvidia-x86_64-v"},
		// Karpenter-AWS amifamily/windows.go's parameters.
		{"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.36/image_id", "Windows_Server-2019-English-Core-EKS_Optimized-1.36-"},
		{"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.36/image_id", "Windows_Server-2022-English-Core-EKS_Optimized-1.36-"},
		{"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.36/image_id", "Windows_Server-2025-English-Core-EKS_Optimized-1.36-"},
	}
	for _, tc := range tests {
		t.Run(tc.param, func(t *testing.T) {
			out, err := sc.GetParameter(ctx(t), &ssm.GetParameterInput{Name: aws.String(tc.param)})
			if err != nil {
				t.Fatal(err)
			}
			img, err := c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{ImageIds: []string{*out.Parameter.Value}})
			if err != nil || !strings.HasPrefix(*img.Images[0].Name, tc.namePrefix) {
				t.Fatalf("image %v %v", img, err)
			}
			if windows := strings.HasPrefix(tc.namePrefix, "Windows"); windows != (img.Images[0].Platform == types.PlatformValuesWindows) ||
				windows && img.Images[0].Architecture != types.ArchitectureValuesX8664 {
				t.Errorf("%s: platform %q architecture %q", *img.Images[0].Name, img.Images[0].Platform, img.Images[0].Architecture)
			}
		})
	}
	_, err := sc.GetParameter(ctx(t), &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.99/amazon-linux-2/recommended/image_id")})
	if apiCode(err) != "ParameterNotFound" {
		t.Fatalf("err %v", err)
	}
	many, err := sc.GetParameters(ctx(t), &ssm.GetParametersInput{Names: []string{tests[0].param, "/nope"}})
	if err != nil || len(many.Parameters) != 1 || len(many.InvalidParameters) != 1 {
		t.Fatalf("GetParameters %+v %v", many, err)
	}
	// Publishing a new release moves "recommended" (drift).
	before := *many.Parameters[0].Value
	if _, err := s.EC2().PublishAMI(ec2sim.FamilyAL2023); err != nil {
		t.Fatal(err)
	}
	after, _ := sc.GetParameter(ctx(t), &ssm.GetParameterInput{Name: aws.String(tests[0].param)})
	if *after.Parameter.Value == before {
		t.Fatal("recommended AMI did not move after PublishAMI")
	}
	byName, err := c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-1.36-*"}}}})
	if err != nil || len(byName.Images) != 2 {
		t.Fatalf("name wildcard: %d images, %v", len(byName.Images), err)
	}
	if err := s.EC2().DeprecateImage(before, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	byName, _ = c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-1.36-*"}}}})
	if len(byName.Images) != 1 {
		t.Fatalf("deprecated image still listed: %d", len(byName.Images))
	}
}

func TestLaunchTemplatesAndSecurityGroups(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	launchTemplate(t, s, c, "karpenter.k8s.aws/a", "")
	launchTemplate(t, s, c, "other", "")
	if _, err := c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("other"), LaunchTemplateData: &types.RequestLaunchTemplateData{InstanceType: "m5.large"}}); apiCode(err) != "InvalidLaunchTemplateName.AlreadyExistsException" {
		t.Fatalf("duplicate: %v", err)
	}
	out, err := c.DescribeLaunchTemplates(ctx(t), &ec2.DescribeLaunchTemplatesInput{Filters: []types.Filter{{Name: aws.String("launch-template-name"), Values: []string{"karpenter.k8s.aws/*"}}, {Name: aws.String("tag:karpenter.k8s.aws/cluster"), Values: []string{"test"}}}})
	if err != nil || len(out.LaunchTemplates) != 1 {
		t.Fatalf("describe: %+v %v", out, err)
	}
	if _, err := c.DeleteLaunchTemplate(ctx(t), &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: out.LaunchTemplates[0].LaunchTemplateId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeLaunchTemplates(ctx(t), &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"karpenter.k8s.aws/a"}}); apiCode(err) != "InvalidLaunchTemplateName.NotFoundException" {
		t.Fatalf("after delete: %v", err)
	}
	sgs, err := c.DescribeSecurityGroups(ctx(t), &ec2.DescribeSecurityGroupsInput{Filters: []types.Filter{{Name: aws.String("group-name"), Values: []string{"eks-cluster-sg-*"}}}})
	if err != nil || len(sgs.SecurityGroups) != 1 {
		t.Fatalf("sg by name: %+v %v", sgs, err)
	}
	subnets, err := c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{Filters: discovery("test")})
	if err != nil || len(subnets.Subnets) != 3 {
		t.Fatalf("discovery subnets: %d %v", len(subnets.Subnets), err)
	}
}

func TestPricingGetProducts(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	pc := pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = "us-east-1" })
	filters := []pricingtypes.Filter{
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("regionCode"), Value: aws.String("us-west-2")},
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("operatingSystem"), Value: aws.String("Linux")},
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("preInstalledSw"), Value: aws.String("NA")},
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("capacitystatus"), Value: aws.String("Used")},
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("tenancy"), Value: aws.String("Shared")},
	}
	prices := map[string]string{}
	p := pricing.NewGetProductsPaginator(pc, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: filters, MaxResults: aws.Int32(3)})
	pages := allPages[*pricing.GetProductsOutput, pricing.Options](t, p)
	for _, pg := range pages {
		for _, doc := range pg.PriceList {
			var d struct {
				Product struct {
					Attributes map[string]string `json:"attributes"`
				} `json:"product"`
				Terms struct {
					OnDemand map[string]struct {
						PriceDimensions map[string]struct {
							PricePerUnit map[string]string `json:"pricePerUnit"`
						} `json:"priceDimensions"`
					} `json:"OnDemand"`
				} `json:"terms"`
			}
			if err := json.Unmarshal([]byte(doc), &d); err != nil {
				t.Fatal(err)
			}
			for _, term := range d.Terms.OnDemand {
				for _, dim := range term.PriceDimensions {
					prices[d.Product.Attributes["instanceType"]] = dim.PricePerUnit["USD"]
				}
			}
		}
	}
	if len(prices) != len(s.EC2().Config().Catalog.OnDemand) || len(pages) < 2 || !strings.HasPrefix(prices["m5.large"], "0.096") {
		t.Fatalf("%d prices in %d pages: m5.large=%s", len(prices), len(pages), prices["m5.large"])
	}
	one, err := pc.GetProducts(ctx(t), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: append(filters,
		pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("instanceType"), Value: aws.String("c5.large")})})
	if err != nil || len(one.PriceList) != 1 {
		t.Fatalf("instanceType filter: %v %v", one, err)
	}
}

func TestEKSAndSTS(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	ec := eks.NewFromConfig(cfg)
	d, err := ec.DescribeCluster(ctx(t), &eks.DescribeClusterInput{Name: aws.String("test")})
	if err != nil || string(d.Cluster.Status) != "CREATING" {
		t.Fatalf("before SetEKSCluster: %+v %v", d, err)
	}
	pem := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	s.SetEKSCluster("https://127.0.0.1:6443", pem, "1.36")
	d, err = ec.DescribeCluster(ctx(t), &eks.DescribeClusterInput{Name: aws.String("test")})
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := base64.StdEncoding.DecodeString(*d.Cluster.CertificateAuthority.Data)
	if string(d.Cluster.Status) != "ACTIVE" || *d.Cluster.Endpoint != "https://127.0.0.1:6443" || !bytes.Equal(ca, pem) ||
		*d.Cluster.Version != "1.36" || *d.Cluster.KubernetesNetworkConfig.ServiceIpv4Cidr != "10.0.0.0/24" {
		t.Fatalf("cluster %+v", d.Cluster)
	}
	if _, err := ec.DescribeCluster(ctx(t), &eks.DescribeClusterInput{Name: aws.String("nope")}); apiCode(err) != "ResourceNotFoundException" {
		t.Fatalf("missing cluster: %v", err)
	}
	id, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx(t), &sts.GetCallerIdentityInput{})
	if err != nil || *id.Arn != "arn:aws:iam::111122223333:role/nodewright" || *id.Account != "111122223333" {
		t.Fatalf("identity %+v %v", id, err)
	}
}

// eksToken builds a token the way EKS clients do: a presigned STS
// GetCallerIdentity URL with x-k8s-aws-id signed, base64url without padding.
func eksToken(t *testing.T, cfg aws.Config, cluster string) string {
	t.Helper()
	pc := sts.NewPresignClient(sts.NewFromConfig(cfg))
	req, err := pc.PresignGetCallerIdentity(ctx(t), &sts.GetCallerIdentityInput{}, func(po *sts.PresignOptions) {
		po.ClientOptions = append(po.ClientOptions, sts.WithAPIOptions(func(st *middleware.Stack) error {
			if err := smithyhttp.AddHeaderValue("x-k8s-aws-id", cluster)(st); err != nil {
				return err
			}
			return smithyhttp.AddHeaderValue("X-Amz-Expires", "60")(st)
		}))
	})
	if err != nil {
		t.Fatal(err)
	}
	return EKSTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL))
}

func review(t *testing.T, s *Server, token string) authv1.TokenReviewStatus {
	t.Helper()
	body, _ := json.Marshal(authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token}})
	resp, err := http.Post(s.TokenReviewURL(), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out authv1.TokenReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Status
}

func TestTokenReview(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	good := eksToken(t, cfg, "test")
	other := cfg.Copy()
	other.Credentials = aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(ctx2 context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: DefaultAccessKeyID, SecretAccessKey: "wrong"}, nil
	}))
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"valid", good, true},
		{"other cluster", eksToken(t, cfg, "someone-else"), false},
		{"wrong secret", eksToken(t, other, "test"), false},
		{"not an eks token", "abc.def", false},
		{"tampered", good[:len(good)-4] + "AAAA", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := review(t, s, tc.token)
			if st.Authenticated != tc.ok {
				t.Fatalf("authenticated=%v (%s), want %v", st.Authenticated, st.Error, tc.ok)
			}
			if tc.ok && (st.User.Username != "arn:aws:iam::111122223333:role/nodewright" || st.User.Groups[0] != "system:masters") {
				t.Fatalf("user %+v", st.User)
			}
		})
	}
	// The presigned URL itself is a valid STS request when the header is sent.
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(good, EKSTokenPrefix))
	req, _ := http.NewRequest(http.MethodGet, string(raw), nil)
	req.Header.Set("x-k8s-aws-id", "test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<Arn>arn:aws:iam::111122223333:role/nodewright</Arn>") {
		t.Fatalf("presigned GetCallerIdentity: %d %s", resp.StatusCode, body)
	}
	req.Header.Set("x-k8s-aws-id", "other")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("presigned with another cluster id: %v %v", resp, err)
	}
	// Expired: the same token 16 minutes later.
	late, lcfg := newTestServer(t, func(o *Options) { o.Now = func() time.Time { return time.Now().Add(16 * time.Minute) } })
	_ = lcfg
	if st := review(t, late, good); st.Authenticated {
		t.Fatal("expired token accepted")
	}
}
