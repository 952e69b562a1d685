package doctor

import (
	"context"
	"fmt"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodewright/nodewright/internal/inspect"
)

// NewClients builds every client doctor uses from one AWS configuration
// (the caller's: the SDK's default chain, AWS_ENDPOINT_URL included).
func NewClients(cfg sdkaws.Config) Clients {
	return Clients{
		EC2: ec2.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg), EKS: eks.NewFromConfig(cfg),
		IAM: iam.NewFromConfig(cfg), Quotas: servicequotas.NewFromConfig(cfg), Lambda: lambda.NewFromConfig(cfg),
		Stacks: func(ctx context.Context, stack string) (map[string]string, error) {
			out, err := inspect.StackOutputs(ctx, cfg, stack, nil)
			// CloudFormation answers a stack that does not exist with a
			// ValidationError "Stack with id NAME does not exist".
			if err != nil && strings.Contains(err.Error(), "does not exist") {
				return nil, fmt.Errorf("%w: %w", ErrNoStack, err)
			}
			return out, err
		},
	}
}
