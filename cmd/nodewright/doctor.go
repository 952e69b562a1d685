package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/doctor"
)

// doctorOptions are doctor's flags.
type doctorOptions struct {
	cluster, region, configDir, stack, output string
}

func (o *doctorOptions) check() error {
	switch {
	case o.output != "" && o.output != "text" && o.output != "json":
		return usageError(fmt.Errorf("-o %q: want text or json", o.output))
	case o.cluster == "":
		return usageError(errors.New("--cluster is required"))
	case o.configDir == "":
		return usageError(errors.New("--config is required: the directory of NodePools and EC2NodeClasses the stack deploys"))
	}
	return nil
}

func newDoctorCmd() *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check an AWS account and its EKS cluster for what nodewright needs (read-only)",
		Long: `Doctor checks, with your own AWS credentials and without changing anything,
what a nodewright stack needs from the account and the cluster. One line per
check, PASS, WARN or FAIL; each check that does not pass says how to fix it:

  - the cluster: ACTIVE, its endpoint, Kubernetes 1.30+, authentication mode
    API or API_AND_CONFIG_MAP
  - the stack (nodewright-<cluster>) and its access entries
  - the subnets, security groups and AMIs each EC2NodeClass selects, as the
    functions resolve them (selector tags, aliases through SSM), and free IPs
  - the spot service-linked role, when a NodePool may launch spot
  - Lambda concurrency for the functions' reserved units, and the EC2
    On-Demand and Spot vCPU quotas of the NodePools' instance families
  - the deployed roles' policies, evaluated by IAM (iam:SimulatePrincipalPolicy)
    for the exact requests the functions make, tags included
  - DryRun CreateLaunchTemplate, CreateFleet and TerminateInstances of those
    requests with your rights

Run it before 'cdk deploy' (the stack's checks warn: not deployed yet) and
after it (everything must pass). It exits 1 when a check fails.`,
		Example: `  nodewright doctor --cluster prod --config karpenter/
  nodewright doctor --cluster prod --region eu-west-1 --config karpenter/ -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return runDoctor(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.cluster, "cluster", "", "the EKS cluster's name (required)")
	f.StringVar(&o.region, "region", "", "AWS region (default: AWS_REGION / the AWS profile's region)")
	f.StringVar(&o.configDir, "config", "", "directory of the NodePool and EC2NodeClass YAML the stack deploys (its configDir; required)")
	f.StringVar(&o.stack, "stack", "", "the stack's name (default nodewright-<cluster>)")
	f.StringVarP(&o.output, "output", "o", "", "output format: text or json (default text)")
	return cmd
}

func runDoctor(ctx context.Context, w io.Writer, o doctorOptions) error {
	cfg, err := apis.Load(o.configDir)
	if err != nil {
		return fmt.Errorf("configuration %s: %w", o.configDir, err)
	}
	var opts []func(*config.LoadOptions) error
	if o.region != "" {
		opts = append(opts, config.WithRegion(o.region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return usageError(errors.New("no AWS region: give --region or set AWS_REGION"))
	}
	rep, err := doctor.Run(ctx, doctor.Options{Cluster: o.cluster, Region: awsCfg.Region, Config: cfg, StackName: o.stack}, doctor.NewClients(awsCfg))
	if err != nil {
		return err
	}
	if o.output == "json" {
		err = rep.WriteJSON(w)
	} else {
		err = rep.WriteText(w)
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		_, _, fail := rep.Counts()
		return &exitError{code: exitFailure, err: fmt.Errorf("%d check(s) failed", fail)}
	}
	return nil
}
