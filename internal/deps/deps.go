//go:build tools

// Package deps pins the modules the project's packages import, so parallel
// work never races on go.mod and `go mod tidy` keeps every pinned version.
package deps

import (
	_ "github.com/aws/aws-cdk-go/awscdk/v2"
	_ "github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	_ "github.com/aws/aws-lambda-go/events"
	_ "github.com/aws/aws-lambda-go/lambda"
	_ "github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	_ "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	_ "github.com/aws/aws-sdk-go-v2/service/ec2"
	_ "github.com/aws/aws-sdk-go-v2/service/eks"
	_ "github.com/aws/aws-sdk-go-v2/service/lambda"
	_ "github.com/aws/aws-sdk-go-v2/service/pricing"
	_ "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	_ "github.com/aws/aws-sdk-go-v2/service/sqs"
	_ "github.com/aws/aws-sdk-go-v2/service/ssm"
	_ "github.com/aws/aws-sdk-go-v2/service/sts"
	_ "github.com/aws/constructs-go/constructs/v10"
	_ "github.com/aws/jsii-runtime-go"
	_ "github.com/aws/smithy-go"
	_ "github.com/cdklabs/cdk-nag-go/cdknag/v2"
	_ "github.com/spf13/cobra"
	_ "gopkg.in/yaml.v3"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/api/resource"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/rest"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "sigs.k8s.io/yaml"
)
