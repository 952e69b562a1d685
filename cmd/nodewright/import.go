package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/livecluster"
)

func newImportCmd() *cobra.Command {
	o := importOptions{}
	return withImportFlags(&o, &cobra.Command{
		Use:   "import --kubeconfig PATH [--context NAME] --out DIR [--force]",
		Short: "Write a cluster's Karpenter NodePools and EC2NodeClasses to files nodewright loads",
		Long: `import reads the NodePools (karpenter.sh/v1) and EC2NodeClasses
(karpenter.k8s.aws/v1) of a cluster running Karpenter, read-only (list only),
and writes each to its own file in --out: nodepool-NAME.yaml and
ec2nodeclass-NAME.yaml, without status and the metadata the API server and
Karpenter wrote. 'nodewright validate DIR' accepts the files, and they are
the --config of 'nodewright simulate' and of the deployment.

It then loads what it wrote and prints, as FILE:LINE: FIELD: MESSAGE, every
setting nodewright treats differently from Karpenter (accepted but not yet
honoured, converted, ...). It never replaces an existing file unless --force.`,
		Example: `  nodewright import --kubeconfig ~/.kube/config --context prod --out karpenter/
  nodewright validate karpenter/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runImport(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	})
}

func withImportFlags(o *importOptions, cmd *cobra.Command) *cobra.Command {
	o.cluster.add(cmd, "kubeconfig of the cluster to read (required)")
	cmd.Flags().StringVar(&o.out, "out", "", "folder to write the files to, created if missing (required)")
	cmd.Flags().BoolVar(&o.force, "force", false, "replace files that already exist")
	_ = cmd.MarkFlagRequired("kubeconfig")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

type importOptions struct {
	cluster clusterFlags
	out     string
	force   bool
}

func runImport(ctx context.Context, o importOptions, stdout, stderr io.Writer) error {
	c, err := livecluster.Connect(o.cluster.kubeconfig, o.cluster.context)
	if err != nil {
		return err
	}
	objs, err := livecluster.ReadKarpenter(ctx, c.Dynamic)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return fmt.Errorf("cluster %s has no NodePools or EC2NodeClasses", c.Host)
	}
	paths, err := livecluster.Write(o.out, objs, o.force)
	for i, p := range paths {
		fmt.Fprintf(stdout, "wrote %s (%s %s)\n", p, objs[i].Kind, objs[i].Name)
	}
	if err != nil {
		return err
	}
	cfg, err := apis.Load(paths...)
	printWarnings(stderr, warningLines(cfg.Warnings))
	if err != nil {
		var list apis.ErrorList
		if !errors.As(err, &list) {
			return err
		}
		for _, e := range list {
			fmt.Fprintln(stderr, e.Error())
		}
		return fmt.Errorf("the written files do not validate (%d error(s) above): fix them before using them", len(list))
	}
	differs := "nothing nodewright treats differently from Karpenter"
	if n := len(cfg.Warnings); n > 0 {
		differs = plural(n, "setting nodewright treats differently (warning above)", "settings nodewright treats differently (warnings above)")
	}
	fmt.Fprintf(stdout, "%s and %s written to %s; %s\n", plural(len(cfg.NodePools), "NodePool", "NodePools"),
		plural(len(cfg.NodeClasses), "EC2NodeClass", "EC2NodeClasses"), o.out, differs)
	return nil
}

func warningLines(ws []apis.Warning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}
