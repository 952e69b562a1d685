// Package nodewright is nodewright as a CDK construct for a user's own Go
// CDK app: New places one cluster's functions, queues, table, IAM, EKS
// access entries, webhook registration, alarms and dashboard in any stack,
// beside the user's own resources. The repository's app (infra/cmd) is the
// same code with a stack of its own; see infra/README.md, "CDK as a
// library".
package nodewright

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/infra"
	"github.com/nodewright/nodewright/internal/settings"
)

// Props configures one cluster's nodewright. Unset fields keep the value
// the app's context gives (cdk.json, `cdk synth -c key=value`, the same
// keys as the repository's app, functionSizes included), or Settings when
// it is set.
type Props struct {
	// ClusterName is the EKS cluster to scale. Cluster, an existing cluster
	// (awseks.Cluster_FromClusterAttributes), may name it instead; its name
	// must be known at synth, as it is part of descriptions, alarms and IAM
	// conditions.
	ClusterName string
	Cluster     awseks.ICluster

	// ConfigDir is a directory of NodePool and EC2NodeClass YAML; Config is
	// the same already loaded (an embed.FS, an fstest.MapFS): its .yaml and
	// .yml files at the root. Either is validated at synth and shipped to
	// the functions as a Lambda layer.
	ConfigDir string
	Config    fs.FS

	// FunctionSizes gives functions a memory and timeout, "MB:seconds"
	// ("provisioner": "3008:300"), over those of the context's functionSizes
	// and infra.Sizing.
	FunctionSizes map[string]string
	// OldestPendingPodAlarmSeconds alarms when a pod has been pending longer
	// (at least 60; 300 by default).
	OldestPendingPodAlarmSeconds int
	// AlarmEmail subscribes an address to a topic the construct creates;
	// AlarmTopicArn sends the alarms to an existing topic instead.
	AlarmEmail    string
	AlarmTopicArn string

	// Shadow deploys shadow mode: the functions decide and record what they
	// would do, act on nothing, and hold read rights only.
	Shadow bool

	// AssetDir holds the functions' build, <function>/bootstrap (`make
	// build` writes dist/ in nodewright's repository).
	AssetDir string

	// Settings is every other setting (schedules, VPC, webhook, node roles,
	// EKS access...): nil reads them from the app's context over
	// infra.Defaults(), as the repository's app does.
	Settings *infra.Config
}

// Nodewright is one cluster's nodewright, placed under its own construct.
type Nodewright struct {
	constructs.Construct
	*infra.Resources
}

// New validates props and the NodePool/EC2NodeClass YAML, then adds
// nodewright under a new construct scope/id; on an error it adds nothing.
// Its logical IDs start with the construct's path; with id "Default" they are
// those of the repository's stack (CDK leaves that ID out), which lets a
// stack deployed by the repository's app move into a user's app unreplaced.
func New(scope constructs.Construct, id string, props *Props) (*Nodewright, error) {
	if props == nil {
		props = &Props{}
	}
	cfg, err := configOf(scope, props)
	if err != nil {
		return nil, fmt.Errorf("nodewright %s: %w", id, err)
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	r, err := build(c, cfg, props.Config)
	if err != nil {
		scope.Node().TryRemoveChild(jsii.String(id))
		return nil, fmt.Errorf("nodewright %s: %w", id, err)
	}
	return &Nodewright{Construct: c, Resources: r}, nil
}

// configOf is the configuration props ask for, over the context's.
func configOf(scope constructs.Construct, p *Props) (infra.Config, error) {
	var cfg infra.Config
	if p.Settings != nil {
		cfg = *p.Settings
	} else {
		c, err := infra.FromContext(func(key string) interface{} { return scope.Node().TryGetContext(jsii.String(key)) })
		if err != nil {
			return cfg, err
		}
		cfg = c
	}
	name, err := clusterName(p)
	if err != nil {
		return cfg, err
	}
	if p.ConfigDir != "" && p.Config != nil {
		return cfg, errors.New("set ConfigDir or Config, not both")
	}
	setIf(&cfg.ClusterName, name)
	setIf(&cfg.ConfigDir, p.ConfigDir)
	setIf(&cfg.AssetDir, p.AssetDir)
	setIf(&cfg.AlarmEmail, p.AlarmEmail)
	setIf(&cfg.AlarmTopicArn, p.AlarmTopicArn)
	if p.OldestPendingPodAlarmSeconds != 0 {
		cfg.OldestPendingPodAlarmSeconds = p.OldestPendingPodAlarmSeconds
	}
	if len(p.FunctionSizes) > 0 {
		sizes := maps.Clone(cfg.FunctionSizes)
		if sizes == nil {
			sizes = map[string]string{}
		}
		maps.Copy(sizes, p.FunctionSizes)
		cfg.FunctionSizes = sizes
	}
	if p.Shadow {
		cfg.Mode = settings.ModeShadow
	}
	// The environment is the stack's, whatever the context says.
	st := awscdk.Stack_Of(scope)
	cfg.Account, cfg.Region = literal(st.Account()), literal(st.Region())
	return cfg, nil
}

func setIf(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// literal is s when it is known at synth, else "" (an environment-agnostic
// stack's account is a token).
func literal(s *string) string {
	if s == nil || *awscdk.Token_IsUnresolved(s) {
		return ""
	}
	return *s
}

func clusterName(p *Props) (string, error) {
	if p.Cluster == nil {
		return p.ClusterName, nil
	}
	name := literal(p.Cluster.ClusterName())
	switch {
	case name == "":
		return "", errors.New("the cluster's name is not known at synth: import it with awseks.Cluster_FromClusterAttributes or set ClusterName")
	case p.ClusterName != "" && p.ClusterName != name:
		return "", fmt.Errorf("ClusterName %q and Cluster %q disagree", p.ClusterName, name)
	}
	return name, nil
}

// build stages the generated assets (and the YAML of config) in the cloud
// assembly, where they live as long as the synthesized app, and adds the
// resources under c.
func build(c constructs.Construct, cfg infra.Config, config fs.FS) (*infra.Resources, error) {
	staging, err := stagingDir(c)
	if err != nil {
		return nil, err
	}
	if config != nil {
		dir := filepath.Join(staging, "config")
		if err := copyYAML(config, dir); err != nil {
			return nil, err
		}
		cfg.ConfigDir = dir
	}
	return infra.Build(c, infra.Input{Config: cfg, Loader: infra.LoadWithAPIs, StagingDir: staging})
}

// stagingDir is a directory of the cloud assembly named after c, emptied:
// synthesizing again reuses it.
func stagingDir(c constructs.Construct) (string, error) {
	root := os.TempDir()
	if stage := awscdk.Stage_Of(c); stage != nil {
		root = *stage.Outdir()
	}
	dir := filepath.Join(root, "nodewright-staging-"+*c.Node().Addr())
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("staging directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("staging directory: %w", err)
	}
	return dir, nil
}

// copyYAML writes the .yaml and .yml files at the root of src into dir.
func copyYAML(src fs.FS, dir string) error {
	entries, err := fs.ReadDir(src, ".")
	if err != nil {
		return fmt.Errorf("props.Config: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("props.Config: %w", err)
	}
	for _, e := range entries {
		ext := strings.ToLower(path.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		b, err := fs.ReadFile(src, e.Name())
		if err != nil {
			return fmt.Errorf("props.Config: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return fmt.Errorf("props.Config: %w", err)
		}
	}
	return nil
}
