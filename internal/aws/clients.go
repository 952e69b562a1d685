package aws

import (
	"context"
	"fmt"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// EC2API is the part of the EC2 client this package uses.
type EC2API interface {
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(context.Context, *ec2.DescribeSecurityGroupsInput, ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
	DescribeAvailabilityZones(context.Context, *ec2.DescribeAvailabilityZonesInput, ...func(*ec2.Options)) (*ec2.DescribeAvailabilityZonesOutput, error)
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	DescribeCapacityReservations(context.Context, *ec2.DescribeCapacityReservationsInput, ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	DescribePlacementGroups(context.Context, *ec2.DescribePlacementGroupsInput, ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error)
	DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
}

// allPages returns the items of every page an SDK paginator yields, in
// order: more and next are the paginator's HasMorePages and NextPage.
func allPages[P, O, T any](ctx context.Context, more func() bool, next func(context.Context, ...func(*O)) (P, error), items func(P) []T) ([]T, error) {
	var out []T
	for more() {
		page, err := next(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, items(page)...)
	}
	return out, nil
}

// SSMAPI is the part of the SSM client this package uses.
type SSMAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// EKSAPI is the part of the EKS client this package uses.
type EKSAPI interface {
	DescribeCluster(context.Context, *eks.DescribeClusterInput, ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// PricingAPI is the part of the Pricing client this package uses.
type PricingAPI interface {
	GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// Clients bundles the AWS clients a Provider needs.
type Clients struct {
	EC2     EC2API
	SSM     SSMAPI
	EKS     EKSAPI
	Pricing PricingAPI
}

// PricingRegion picks the Pricing API endpoint region for region: the API
// lives in only a few regions, and us-east-1 serves every commercial region.
func PricingRegion(region string) string {
	switch {
	case len(region) >= 3 && region[:3] == "ap-":
		return "ap-south-1"
	case len(region) >= 3 && region[:3] == "eu-":
		return "eu-central-1"
	case len(region) >= 3 && region[:3] == "cn-":
		return "cn-northwest-1"
	default:
		return "us-east-1"
	}
}

// NewClients builds SDK clients from the default credential chain for
// region. The SDK honours AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE>
// (EC2, SSM, EKS, PRICING), which is how tests and the local demo reach the
// simulator.
func NewClients(ctx context.Context, region string, optFns ...func(*config.LoadOptions) error) (Clients, sdkaws.Config, error) {
	opts := append([]func(*config.LoadOptions) error{config.WithRegion(region)}, optFns...)
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return Clients{}, sdkaws.Config{}, fmt.Errorf("load AWS config for %s: %w", region, err)
	}
	return Clients{
		EC2: ec2.NewFromConfig(cfg),
		SSM: ssm.NewFromConfig(cfg),
		EKS: eks.NewFromConfig(cfg),
		Pricing: pricing.NewFromConfig(cfg, func(o *pricing.Options) {
			o.Region = PricingRegion(cfg.Region)
		}),
	}, cfg, nil
}
