// Command nodewright-cdk is the CDK app (cdk.json's "app"): one nodewright
// stack for the cluster named by -c clusterName, with the NodePools and
// EC2NodeClasses in -c configDir validated before anything is synthesized.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/infra"
)

func main() {
	os.Exit(run())
}

func run() int {
	// Every CDK process unpacks the jsii runtime into $TMPDIR; Close removes it.
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	cfg, err := infra.FromContext(func(key string) interface{} {
		return app.Node().TryGetContext(jsii.String(key))
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodewright: %v\n", err)
		return 1
	}
	// Generated asset directories (config layer, placeholders) only need to
	// live until Synth has copied them into the cloud assembly.
	staging, err := os.MkdirTemp("", "nodewright-cdk-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodewright: %v\n", err)
		return 1
	}
	defer os.RemoveAll(staging)

	st, err := infra.NewStack(app, infra.StackName(cfg.ClusterName), infra.StackInput{
		Config:     cfg,
		Loader:     infra.LoadWithAPIs,
		StagingDir: staging,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodewright: %v\n", err)
		return 1
	}
	for _, w := range st.NodeConfig.Warnings {
		fmt.Fprintf(os.Stderr, "nodewright: warning: %s\n", w)
	}
	if cfg.PlaceholderAssets {
		fmt.Fprintln(os.Stderr, "nodewright: warning: placeholderAssets is on: functions without `make build` output get placeholder code that fails when invoked")
	}
	infra.ApplyNag(app)
	app.Synth(nil)
	return 0
}
