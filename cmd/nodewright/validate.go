package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/apis"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate PATH...",
		Short: "Validate NodePool and EC2NodeClass files as Karpenter would",
		Long: `Validate loads Karpenter NodePools (karpenter.sh/v1) and EC2NodeClasses
(karpenter.k8s.aws/v1) from files or directories (recursively: *.yaml, *.yml,
*.json; multi-document YAML). v1beta1 objects are converted with a deprecation
warning; other kinds are skipped with a warning. Warnings go to stderr.

On success it prints one line per object and exits 0. Otherwise it prints
every error as FILE:LINE: FIELD: MESSAGE and exits 1.`,
		Example: `  nodewright validate karpenter/
  nodewright validate nodepools/default.yaml ec2nodeclasses/`,
		// Errors are printed one per line by runValidate, not by cobra.
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				err := errors.New("validate needs at least one file or directory")
				fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\n%s", err, cmd.UsageString())
				return usageError(err)
			}
			return runValidate(cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		},
	}
}

func runValidate(stdout, stderr io.Writer, paths []string) error {
	cfg, err := loadConfig(stderr, paths...)
	if err != nil {
		return err
	}
	for _, np := range cfg.NodePools {
		fmt.Fprintf(stdout, "NodePool %s: ok (%s)\n", np.Name, strings.Join(nodePoolSummary(cfg, np), ", "))
	}
	for _, nc := range cfg.NodeClasses {
		fmt.Fprintf(stdout, "EC2NodeClass %s: ok (%s)\n", nc.Name, strings.Join(nodeClassSummary(cfg, nc), ", "))
	}
	if len(cfg.NodePools)+len(cfg.NodeClasses) == 0 {
		fmt.Fprintln(stdout, "no NodePools or EC2NodeClasses found")
	}
	return nil
}

// loadConfig loads NodePools and EC2NodeClasses as the functions do,
// printing warnings and every error as FILE:LINE: FIELD: MESSAGE to stderr
// (validate, local up --config).
func loadConfig(stderr io.Writer, paths ...string) (*apis.Config, error) {
	cfg, err := apis.Load(paths...)
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if err == nil {
		return cfg, nil
	}
	var list apis.ErrorList
	if !errors.As(err, &list) {
		fmt.Fprintln(stderr, err)
		return nil, &exitError{code: 1, err: err}
	}
	for _, e := range list {
		fmt.Fprintln(stderr, e.Error())
	}
	noun := "errors"
	if len(list) == 1 {
		noun = "error"
	}
	fmt.Fprintf(stderr, "%d %s\n", len(list), noun)
	return nil, &exitError{code: 1, err: fmt.Errorf("validation failed: %d %s", len(list), noun)}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func nodePoolSummary(cfg *apis.Config, np *apis.NodePool) []string {
	s := np.Spec
	parts := []string{
		"nodeClassRef " + s.Template.Spec.NodeClassRef.Name,
		plural(len(s.Template.Spec.Requirements), "requirement", "requirements"),
	}
	if len(s.Limits) > 0 {
		var ls []string
		for name, q := range s.Limits {
			ls = append(ls, fmt.Sprintf("%s=%s", name, quantityString(q)))
		}
		slices.Sort(ls)
		parts = append(parts, "limits "+strings.Join(ls, ","))
	}
	if s.Weight != nil {
		parts = append(parts, fmt.Sprintf("weight %d", *s.Weight))
	}
	if n := len(s.Template.Spec.Taints); n > 0 {
		parts = append(parts, plural(n, "taint", "taints"))
	}
	parts = append(parts, "consolidation "+string(s.Disruption.ConsolidationPolicy)+" after "+s.Disruption.ConsolidateAfter.String(),
		"expireAfter "+s.Template.Spec.ExpireAfter.String())
	if src := cfg.Sources[apis.ObjectKey{Kind: apis.NodePoolKind, Name: np.Name}]; src.APIVersion != apis.NodePoolAPIV1 {
		parts = append(parts, "converted from "+src.APIVersion)
	}
	return parts
}

func nodeClassSummary(cfg *apis.Config, nc *apis.EC2NodeClass) []string {
	s := nc.Spec
	var parts []string
	if alias := nc.AMIAlias(); alias != "" {
		parts = append(parts, "alias "+alias)
	} else {
		parts = append(parts, "amiFamily "+nc.AMIFamily()+", "+plural(len(s.AMISelectorTerms), "AMI term", "AMI terms"))
	}
	if s.Role != "" {
		parts = append(parts, "role "+s.Role)
	} else if s.InstanceProfile != nil {
		parts = append(parts, "instanceProfile "+*s.InstanceProfile)
	}
	parts = append(parts,
		plural(len(s.SubnetSelectorTerms), "subnet term", "subnet terms"),
		plural(len(s.SecurityGroupSelectorTerms), "security group term", "security group terms"))
	if s.Kubelet != nil {
		parts = append(parts, "kubelet")
	}
	if src := cfg.Sources[apis.ObjectKey{Kind: apis.EC2NodeClassKind, Name: nc.Name}]; src.APIVersion != apis.NodeClassAPIV1 {
		parts = append(parts, "converted from "+src.APIVersion)
	}
	return parts
}

// quantityString prints whole decimal quantities as plain numbers ("1000",
// not the canonical "1k") so the summary reads like the file.
func quantityString(q resource.Quantity) string {
	if q.Format == resource.DecimalSI && q.MilliValue()%1000 == 0 {
		return strconv.FormatInt(q.Value(), 10)
	}
	return q.String()
}
