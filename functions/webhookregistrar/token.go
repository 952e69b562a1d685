package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The EKS authenticator accepts a pre-signed STS GetCallerIdentity URL whose
// signature covers the x-k8s-aws-id header (the cluster name), prefixed and
// base64url-encoded. The URL itself is valid for 60 s of clock skew; EKS
// treats the token as valid for 15 minutes, far longer than one custom
// resource invocation, so the registrar mints one token per invocation.
const (
	eksTokenPrefix    = "k8s-aws-v1."
	clusterNameHeader = "x-k8s-aws-id"
	presignExpiry     = "60"
)

// eksToken returns a bearer token that EKS maps to the caller's IAM role.
func eksToken(ctx context.Context, p *sts.PresignClient, clusterName string) (string, error) {
	req, err := p.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(o *sts.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, func(so *sts.Options) {
			so.APIOptions = append(so.APIOptions,
				smithyhttp.SetHeaderValue(clusterNameHeader, clusterName),
				smithyhttp.SetHeaderValue("X-Amz-Expires", presignExpiry),
			)
		})
	})
	if err != nil {
		return "", fmt.Errorf("presign sts:GetCallerIdentity for cluster %s: %w", clusterName, err)
	}
	return eksTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)), nil
}

// clusterClients opens a Kubernetes client for a cluster by name; found is
// false when the cluster no longer exists (delete after the cluster went).
type clusterClients func(ctx context.Context, clusterName string) (kc kubernetes.Interface, found bool, err error)

type describeCluster interface {
	DescribeCluster(ctx context.Context, in *eks.DescribeClusterInput, optFns ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

func eksClusterClients(api describeCluster, p *sts.PresignClient) clusterClients {
	return func(ctx context.Context, clusterName string) (kubernetes.Interface, bool, error) {
		out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(clusterName)})
		var nf *ekstypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("describe cluster %s: %w", clusterName, err)
		}
		cfg, err := restConfig(out.Cluster)
		if err != nil {
			return nil, true, fmt.Errorf("cluster %s: %w", clusterName, err)
		}
		token, err := eksToken(ctx, p, clusterName)
		if err != nil {
			return nil, true, err
		}
		cfg.BearerToken = token
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, true, fmt.Errorf("kubernetes client for cluster %s: %w", clusterName, err)
		}
		return kc, true, nil
	}
}

// restConfig turns DescribeCluster's endpoint and CA into a client config
// (without credentials).
func restConfig(c *ekstypes.Cluster) (*rest.Config, error) {
	if c == nil || aws.ToString(c.Endpoint) == "" {
		return nil, errors.New("DescribeCluster returned no endpoint (is the cluster still creating?)")
	}
	if c.CertificateAuthority == nil || aws.ToString(c.CertificateAuthority.Data) == "" {
		return nil, errors.New("DescribeCluster returned no certificate authority")
	}
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(c.CertificateAuthority.Data))
	if err != nil {
		return nil, fmt.Errorf("decode certificate authority: %w", err)
	}
	return &rest.Config{
		Host:            aws.ToString(c.Endpoint),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		// CloudFormation waits on us; never hang on an unreachable endpoint
		// (a private endpoint without the functions in the VPC, say).
		Timeout: 30 * time.Second,
	}, nil
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
		if aws.ToString(out.SecretString) == "" {
			return "", fmt.Errorf("secret %s has no string value", arn)
		}
		return aws.ToString(out.SecretString), nil
	}
}
