package kube

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

type describer struct {
	out *eks.DescribeClusterOutput
	err error
}

func (d describer) DescribeCluster(context.Context, *eks.DescribeClusterInput, ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	return d.out, d.err
}

func TestDescribeEndpoint(t *testing.T) {
	pem := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	ok := describer{out: &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{
		Endpoint:             aws.String("https://ABC.gr7.us-west-2.eks.amazonaws.com"),
		CertificateAuthority: &ekstypes.Certificate{Data: aws.String(base64.StdEncoding.EncodeToString([]byte(pem)))},
		Status:               ekstypes.ClusterStatusActive,
	}}}
	ep, err := DescribeEndpoint(context.Background(), ok, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if ep.Endpoint != "https://ABC.gr7.us-west-2.eks.amazonaws.com" || string(ep.CAData) != pem || ep.Name != "prod" {
		t.Fatalf("endpoint %+v", ep)
	}

	creating := describer{out: &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{Status: ekstypes.ClusterStatusCreating}}}
	if _, err := DescribeEndpoint(context.Background(), creating, "prod"); err == nil || !strings.Contains(err.Error(), "CREATING") {
		t.Fatalf("cluster without endpoint: %v", err)
	}
	badCA := describer{out: &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{
		Endpoint: aws.String("https://x"), CertificateAuthority: &ekstypes.Certificate{Data: aws.String("%%%")},
	}}}
	if _, err := DescribeEndpoint(context.Background(), badCA, "prod"); err == nil || !strings.Contains(err.Error(), "base64") {
		t.Fatalf("bad CA: %v", err)
	}
	boom := errors.New("AccessDenied")
	if _, err := DescribeEndpoint(context.Background(), describer{err: boom}, "prod"); !errors.Is(err, boom) {
		t.Fatalf("API error not wrapped: %v", err)
	}
}

func TestRESTConfigSizing(t *testing.T) {
	ts, err := NewTokenSource(testAWSConfig("https://sts.local.test"), "c")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(ClusterEndpoint{Endpoint: "https://x", CAData: []byte("ca")}, ts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != DefaultQPS || cfg.Burst != DefaultBurst || cfg.UserAgent != "nodewright" || cfg.WrapTransport == nil ||
		!strings.HasPrefix(cfg.AcceptContentTypes, "application/vnd.kubernetes.protobuf") {
		t.Fatalf("config %+v", cfg)
	}
	if _, err := RESTConfig(ClusterEndpoint{}, ts, Options{}); err == nil {
		t.Fatal("empty endpoint accepted")
	}
	if _, err := (&Client{}).PatchNodeLabels(context.Background(), "n", map[string]string{"a": "1"}, []string{"a"}); err == nil {
		t.Fatal("label both set and removed accepted")
	}
}
