package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

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
	return resourceVerb(&cobra.Command{
		Use:   "get (nodeclaims|nodepools)",
		Short: "List NodeClaims or NodePool usage from the nodewright table",
		Long: `Get reads what the nodewright functions recorded in their DynamoDB table.

  get nodeclaims   the columns of 'kubectl get nodeclaims' (wide: + ID, NODEPOOL,
                   NODECLASS, DRIFTED) and each node's price per hour; -o json|yaml
                   a v1 List of karpenter.sh/v1 NodeClaims; -l selects by label;
                   -w keeps watching and prints the claims that change
  get nodepools    each NodePool's nodes, CPU and memory (summed claim capacity)
                   against its limits, and its nodes' cost per hour

The table is --table, else $` + settings.EnvTableName + `, else the TableName output of
the CloudFormation stack (--stack, or nodewright-<--cluster>).`,
		Example: `  nodewright get nodeclaims --cluster prod -o wide
  nodewright get nodeclaims -l karpenter.sh/capacity-type=spot -o name
  nodewright get nodeclaims --nodepool default -o yaml
  nodewright get nodeclaims -w
  nodewright get nodepools --table nodewright-prod-Table --config karpenter/`,
	}, "nodeclaims, nodepools", newGetNodeClaimsCmd(), newGetNodePoolsCmd())
}

// getClaimsOptions are get nodeclaims' flags.
type getClaimsOptions struct {
	print    printFlags
	nodePool string
	selector string
	deleted  bool
	watch    bool
	interval time.Duration
}

func newGetNodeClaimsCmd() *cobra.Command {
	var tf tableFlags
	var o getClaimsOptions
	var sel labels.Selector
	check := func() (err error) {
		sel, err = o.check()
		return err
	}
	cmd := &cobra.Command{
		Use:     "nodeclaims",
		Aliases: []string{"nodeclaim", "nc"},
		Short:   "List NodeClaims as kubectl get nodeclaims would",
		Args:    noArgs,
		RunE: tableRun(&tf, check, func(ctx context.Context, cmd *cobra.Command, _ []string, st *store.Store, region string) error {
			return runGetNodeClaims(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), st, region, o, sel)
		}),
	}
	tf.register(cmd)
	o.print.register(cmd, inspect.Outputs...)
	f := cmd.Flags()
	f.StringVar(&o.nodePool, "nodepool", "", "only the claims of this NodePool")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector (e.g. karpenter.sh/capacity-type=spot,node.kubernetes.io/instance-type in (m5.large))")
	f.BoolVar(&o.deleted, "deleted", false, "include deleted claims (tombstones are kept for 7 days)")
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, keep polling the table and print the claims that change (Ctrl-C stops)")
	f.DurationVar(&o.interval, "watch-interval", 5*time.Second, "how often --watch polls the table")
	return cmd
}

// check validates the flags before any AWS call: usage errors.
func (o *getClaimsOptions) check() (labels.Selector, error) {
	if err := o.print.check(); err != nil {
		return nil, err
	}
	sel, err := labels.Parse(o.selector)
	if err != nil {
		return nil, usageError(fmt.Errorf("--selector %q: %w", o.selector, err))
	}
	if o.watch && o.interval <= 0 {
		return nil, usageError(fmt.Errorf("--watch-interval %s: must be positive", o.interval))
	}
	return sel, nil
}

func runGetNodeClaims(ctx context.Context, stdout, stderr io.Writer, st *store.Store, region string, o getClaimsOptions, sel labels.Selector) error {
	prices, err := inspect.LoadPrices(ctx, st, region)
	if err != nil {
		return err
	}
	load := func(ctx context.Context) ([]inspect.Claim, error) {
		claims, err := inspect.LoadClaims(ctx, st, o.nodePool, o.deleted || o.watch)
		return selectClaims(claims, sel), err
	}
	if o.watch {
		w := &claimWatch{out: stdout, errOut: stderr, print: o.print.PrintOptions, prices: prices, deleted: o.deleted, now: time.Now}
		return w.run(ctx, load, o.interval)
	}
	claims, err := load(ctx)
	if err != nil {
		return err
	}
	return writeNodeClaims(stdout, stderr, claims, o.print.PrintOptions, prices, time.Now())
}

// writeNodeClaims prints claims on stdout; an empty listing says so on stderr
// as kubectl does, so scripts reading stdout see nothing.
func writeNodeClaims(stdout, stderr io.Writer, claims []inspect.Claim, o inspect.PrintOptions, prices inspect.Prices, now time.Time) error {
	if len(claims) == 0 && o.Output != inspect.OutputJSON && o.Output != inspect.OutputYAML {
		fmt.Fprintln(stderr, "No nodeclaims found.")
	}
	return inspect.WriteNodeClaims(stdout, claims, o, prices, now)
}

// selectClaims keeps the claims whose labels match sel.
func selectClaims(claims []inspect.Claim, sel labels.Selector) []inspect.Claim {
	if sel.Empty() {
		return claims
	}
	var out []inspect.Claim
	for _, c := range claims {
		if sel.Matches(labels.Set(c.Labels)) {
			out = append(out, c)
		}
	}
	return out
}

// noArgs is cobra.NoArgs naming the command, as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError(fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args))
	}
	return nil
}

func newGetNodePoolsCmd() *cobra.Command {
	var tf tableFlags
	var configDir string
	var pf printFlags
	var cfg *apis.Config
	check := func() error {
		if err := pf.check(); err != nil {
			return err
		}
		if configDir == "" {
			configDir = os.Getenv(settings.EnvConfigDir)
		}
		if configDir == "" {
			return nil
		}
		c, err := apis.Load(configDir)
		if err != nil {
			return fmt.Errorf("load --config %s: %w", configDir, err)
		}
		cfg = c
		return nil
	}
	cmd := &cobra.Command{
		Use:     "nodepools",
		Aliases: []string{"nodepool", "np"},
		Short:   "Show each NodePool's usage against its limits and its cost per hour",
		Args:    noArgs,
		RunE: tableRun(&tf, check, func(ctx context.Context, cmd *cobra.Command, _ []string, st *store.Store, region string) error {
			return runGetNodePools(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), st, region, cfg, pf.PrintOptions)
		}),
	}
	tf.register(cmd)
	pf.register(cmd, inspect.Outputs...)
	cmd.Flags().StringVar(&configDir, "config", "", "directory of NodePool/EC2NodeClass YAML (limits, weights; default: $"+settings.EnvConfigDir+")")
	return cmd
}

func runGetNodePools(ctx context.Context, stdout, stderr io.Writer, st *store.Store, region string, cfg *apis.Config, o inspect.PrintOptions) error {
	claims, err := inspect.LoadClaims(ctx, st, "", false)
	if err != nil {
		return err
	}
	prices, err := inspect.LoadPrices(ctx, st, region)
	if err != nil {
		return err
	}
	pools := inspect.Usage(cfg, claims, prices)
	if len(pools) == 0 && o.Output != inspect.OutputJSON && o.Output != inspect.OutputYAML {
		fmt.Fprintln(stderr, "No nodepools found (give --config DIR to list configured pools without nodes).")
	}
	return inspect.WriteNodePools(stdout, pools, o)
}
