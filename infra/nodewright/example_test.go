package nodewright_test

import (
	"fmt"
	"log"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/infra"
	"github.com/nodewright/nodewright/infra/nodewright"
)

// A platform team's own CDK app: one stack with its own resources and
// nodewright for its cluster. `cdk synth -c functionSizes=...` and every
// other context key of the repository's app still apply; what is set in
// Props wins.
func Example() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("platform-prod"), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String("111122223333"), Region: jsii.String("eu-west-1")},
	})
	artifacts := awss3.NewBucket(stack, jsii.String("Artifacts"), &awss3.BucketProps{EnforceSSL: jsii.Bool(true)})

	nw, err := nodewright.New(stack, "Autoscaler", &nodewright.Props{
		ClusterName: "prod",
		// NodePools and EC2NodeClasses, as Karpenter reads them.
		ConfigDir: "nodepools",
		// nodewright's `make build` output (dist/).
		AssetDir:      "third_party/nodewright/dist",
		FunctionSizes: map[string]string{"provisioner": "3008:300"},
		AlarmEmail:    "oncall@example.com",
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range nw.NodeConfig.Warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}
	// The handles are the user's to wire: here the nodes may read the
	// team's artifacts.
	artifacts.GrantRead(nw.NodeRole, nil)
	infra.ApplyNag(app) // optional: cdk-nag's AwsSolutions checks, as the repository's app runs them
	app.Synth(nil)
}
