package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/inspect"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// tableFlags locate the DynamoDB table the functions write: --table, else
// NODEWRIGHT_TABLE_NAME, else the TableName output of --stack (or of
// nodewright-<cluster> when only --cluster is given).
type tableFlags struct {
	region  string
	table   string
	stack   string
	cluster string
}

func (f *tableFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.region, "region", "", "AWS region (default: AWS_REGION / the AWS profile's region)")
	cmd.Flags().StringVar(&f.table, "table", "", "DynamoDB table name (default: $"+settings.EnvTableName+", else the stack's TableName output)")
	cmd.Flags().StringVar(&f.stack, "stack", "", "CloudFormation stack to read the table name from (DescribeStacks outputs)")
	cmd.Flags().StringVar(&f.cluster, "cluster", "", "EKS cluster name; the stack defaults to nodewright-<cluster> (default: $"+settings.EnvClusterName+")")
}

// open builds the store over the located table and returns the region too.
func (f *tableFlags) open(ctx context.Context) (*store.Store, string, error) {
	var opts []func(*config.LoadOptions) error
	if f.region != "" {
		opts = append(opts, config.WithRegion(f.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, "", fmt.Errorf("no AWS region: give --region or set AWS_REGION")
	}
	table := f.table
	if table == "" {
		table = os.Getenv(settings.EnvTableName)
	}
	if table == "" {
		stack := f.stack
		if stack == "" {
			cluster := f.cluster
			if cluster == "" {
				cluster = os.Getenv(settings.EnvClusterName)
			}
			if cluster == "" {
				return nil, "", fmt.Errorf("no table: give --table, --stack or --cluster (or set %s)", settings.EnvTableName)
			}
			stack = "nodewright-" + cluster
		}
		outs, err := inspect.StackOutputs(ctx, cfg, stack, nil)
		if err != nil {
			return nil, "", err
		}
		if table = outs[inspect.OutputTableName]; table == "" {
			return nil, "", fmt.Errorf("stack %s has no %s output (is it a nodewright stack?)", stack, inspect.OutputTableName)
		}
	}
	st, err := store.New(store.NewDynamoDBClient(cfg), table)
	if err != nil {
		return nil, "", fmt.Errorf("open table %s: %w", table, err)
	}
	return st, cfg.Region, nil
}

func newGetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get (nodeclaims|nodepools)",
		Short: "List NodeClaims or NodePool usage from the nodewright table",
		Long: `Get reads what the nodewright functions recorded in their DynamoDB table.

  get nodeclaims   the columns of 'kubectl get nodeclaims' (wide: + ID, NODEPOOL,
                   NODECLASS, DRIFTED) and each node's price per hour
  get nodepools    each NodePool's nodes, CPU and memory (summed claim capacity)
                   against its limits, and its nodes' cost per hour

The table is --table, else $` + settings.EnvTableName + `, else the TableName output of
the CloudFormation stack (--stack, or nodewright-<--cluster>).`,
		Example: `  nodewright get nodeclaims --cluster prod -o wide
  nodewright get nodeclaims --nodepool default -o yaml
  nodewright get nodepools --table nodewright-prod-Table --config karpenter/`,
	}
	cmd.AddCommand(newGetNodeClaimsCmd(), newGetNodePoolsCmd())
	return cmd
}

func newGetNodeClaimsCmd() *cobra.Command {
	var tf tableFlags
	var nodePool, output string
	var deleted bool
	cmd := &cobra.Command{
		Use:     "nodeclaims",
		Aliases: []string{"nodeclaim", "nc"},
		Short:   "List NodeClaims as kubectl get nodeclaims would",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := inspect.CheckOutput(output); err != nil {
				return err
			}
			ctx := cmd.Context()
			st, region, err := tf.open(ctx)
			if err != nil {
				return err
			}
			return runGetNodeClaims(ctx, cmd.OutOrStdout(), st, region, nodePool, output, deleted, time.Now())
		},
	}
	tf.register(cmd)
	cmd.Flags().StringVar(&nodePool, "nodepool", "", "only the claims of this NodePool")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "include deleted claims (tombstones are kept for 7 days)")
	return cmd
}

func runGetNodeClaims(ctx context.Context, w io.Writer, st *store.Store, region, nodePool, output string, deleted bool, now time.Time) error {
	claims, err := inspect.LoadClaims(ctx, st, nodePool, deleted)
	if err != nil {
		return err
	}
	prices, err := inspect.LoadPrices(ctx, st, region)
	if err != nil {
		return err
	}
	return inspect.WriteNodeClaims(w, claims, output, prices, now)
}

func newGetNodePoolsCmd() *cobra.Command {
	var tf tableFlags
	var configDir string
	cmd := &cobra.Command{
		Use:     "nodepools",
		Aliases: []string{"nodepool", "np"},
		Short:   "Show each NodePool's usage against its limits and its cost per hour",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configDir == "" {
				configDir = os.Getenv(settings.EnvConfigDir)
			}
			var cfg *apis.Config
			if configDir != "" {
				c, err := apis.Load(configDir)
				if err != nil {
					return fmt.Errorf("load --config %s: %w", configDir, err)
				}
				cfg = c
			}
			ctx := cmd.Context()
			st, region, err := tf.open(ctx)
			if err != nil {
				return err
			}
			return runGetNodePools(ctx, cmd.OutOrStdout(), st, region, cfg)
		},
	}
	tf.register(cmd)
	cmd.Flags().StringVar(&configDir, "config", "", "directory of NodePool/EC2NodeClass YAML (limits, weights; default: $"+settings.EnvConfigDir+")")
	return cmd
}

func runGetNodePools(ctx context.Context, w io.Writer, st *store.Store, region string, cfg *apis.Config) error {
	claims, err := inspect.LoadClaims(ctx, st, "", false)
	if err != nil {
		return err
	}
	prices, err := inspect.LoadPrices(ctx, st, region)
	if err != nil {
		return err
	}
	return inspect.WriteNodePools(w, inspect.Usage(cfg, claims, prices))
}
