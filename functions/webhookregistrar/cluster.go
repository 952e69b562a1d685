package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/kube"
)

// clusterClients opens a Kubernetes client for a cluster by name; found is
// false when the cluster no longer exists (a delete after the cluster went).
type clusterClients func(ctx context.Context, clusterName string) (kc kubernetes.Interface, found bool, err error)

// eksClusterClients connects with the project's EKS adapter: DescribeCluster
// for endpoint and CA, an STS-presigned token for the registrar's role.
func eksClusterClients(awsCfg aws.Config, api kube.ClusterDescriber) clusterClients {
	return func(ctx context.Context, clusterName string) (kubernetes.Interface, bool, error) {
		ep, err := kube.DescribeEndpoint(ctx, api, clusterName)
		var nf *ekstypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		ts, err := kube.NewTokenSource(awsCfg, clusterName)
		if err != nil {
			return nil, true, err
		}
		// CloudFormation waits on us: never hang on an unreachable endpoint
		// (a private endpoint without the functions in the VPC, say).
		cfg, err := kube.RESTConfig(ep, ts, kube.Options{Timeout: 30 * time.Second, UserAgent: "nodewright-webhookregistrar"})
		if err != nil {
			return nil, true, err
		}
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, true, fmt.Errorf("kubernetes client for cluster %s: %w", clusterName, err)
		}
		return kc, true, nil
	}
}

// secretValue reads a Secrets Manager secret's current string value.
type secretValue func(ctx context.Context, arn string) (string, error)

type getSecretValue interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

func secretsManagerValue(api getSecretValue) secretValue {
	return func(ctx context.Context, arn string) (string, error) {
		out, err := api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			return "", fmt.Errorf("read secret %s: %w", arn, err)
		}
		if admission.NormalizeSecret(aws.ToString(out.SecretString)) == "" {
			return "", fmt.Errorf("secret %s has no string value", arn)
		}
		return aws.ToString(out.SecretString), nil
	}
}
