package infra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Input is everything Build needs.
type Input struct {
	Config Config
	// Loader validates the YAML in Config.ConfigDir (apis.Load behind it).
	Loader ConfigLoader
	// StagingDir receives generated asset directories (config layer,
	// placeholders). It must exist until the app has synthesized.
	StagingDir string
}

// Build validates the input (configuration first, then the user's YAML)
// and only then adds nodewright's resources directly under scope, with the
// construct IDs NewStack gives them. Under a stack their logical IDs are
// NewStack's; under a construct of ID "Default" too (CDK leaves that ID out
// of logical IDs); under any other construct they start with its path.
func Build(scope constructs.Construct, in Input) (*Resources, error) {
	p, err := prepare(in)
	if err != nil {
		return nil, err
	}
	return p.build(scope), nil
}

// prepared is a validated input with its assets staged: building from it
// cannot fail.
type prepared struct {
	cfg      Config
	nc       *NodeConfig
	roles    []*NodeRole
	code     map[string]string
	layerDir string
}

func prepare(in Input) (*prepared, error) {
	cfg := in.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if in.Loader == nil {
		return nil, fmt.Errorf("no configuration loader")
	}
	files, err := ConfigFiles(cfg.ConfigDir)
	if err != nil {
		return nil, err
	}
	nc, err := in.Loader(files...)
	if err != nil {
		return nil, fmt.Errorf("%s %s is invalid:\n%w", CtxConfigDir, cfg.ConfigDir, err)
	}
	roles, err := checkNodeConfig(cfg, nc)
	if err != nil {
		return nil, err
	}
	if in.StagingDir == "" {
		return nil, fmt.Errorf("no staging directory for generated assets")
	}
	p := &prepared{cfg: cfg, nc: nc, roles: roles, code: map[string]string{}}
	for _, fn := range Functions {
		if p.code[fn], err = functionCode(cfg, in.StagingDir, fn); err != nil {
			return nil, err
		}
	}
	if p.layerDir, err = stageConfigLayer(in.StagingDir, files); err != nil {
		return nil, err
	}
	return p, nil
}

// build adds the resources under scope, in the order they always have
// been (the order shapes nothing in the template but keeps diffs of the
// cloud assembly's tree small).
func (p *prepared) build(scope constructs.Construct) *Resources {
	r := &Resources{Config: p.cfg, NodeConfig: p.nc, NodeRoles: p.roles, Functions: map[string]awslambda.Function{}}
	awscdk.Tags_Of(scope).Add(jsii.String("nodewright.io/cluster"), jsii.String(p.cfg.ClusterName), nil)

	b := &builder{Resources: r, scope: scope, stack: awscdk.Stack_Of(scope), cfg: p.cfg, code: p.code}
	b.table()
	b.queues()
	b.nodeRole()
	b.controllerRole()
	b.network()
	b.functions(p.layerDir)
	b.interruptionRules()
	b.schedules()
	b.registrarAsyncInvoke()
	b.accessEntries()
	if p.cfg.Webhook {
		b.webhook()
	}
	b.trustRegistrar()
	b.observability()
	b.outputs()
	suppressNagFindings(b)
	return r
}
