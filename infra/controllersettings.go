package infra

import (
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/settings"
)

// Karpenter's controller settings, by its Helm chart's names under
// settings.* (batchIdleDuration, batchMaxDuration, vmMemoryOverheadPercent,
// reservedENIs, minValuesPolicy, preferencePolicy): -c key=value or cdk.json
// context. Each becomes the controller functions' environment variable of
// internal/settings; unset keeps Karpenter's default there.
var controllerSettingKeys = []struct{ ctx, env string }{
	{"batchIdleDuration", settings.EnvBatchIdle},
	{"batchMaxDuration", settings.EnvBatchMax},
	{"vmMemoryOverheadPercent", settings.EnvVMMemoryOverheadPercent},
	{"reservedENIs", settings.EnvReservedENIs},
	{"minValuesPolicy", settings.EnvMinValuesPolicy},
	{"preferencePolicy", settings.EnvPreferencePolicy},
}

// controllerSettings reads the keys that are set.
func (r *contextReader) controllerSettings(dst *map[string]string) {
	for _, k := range controllerSettingKeys {
		var v string
		r.str(k.ctx, &v)
		if v == "" {
			continue
		}
		if *dst == nil {
			*dst = map[string]string{}
		}
		(*dst)[k.ctx] = v
	}
}

// controllerSettingsEnv is the environment the settings give the
// controller functions.
func (c *Config) controllerSettingsEnv() map[string]string {
	out := map[string]string{}
	for _, k := range controllerSettingKeys {
		if v, ok := c.ControllerSettings[k.ctx]; ok {
			out[k.env] = v
		}
	}
	return out
}

// validateControllerSettings refuses, at synth time, what the functions
// would refuse at start: the functions' own parser decides.
func (c *Config) validateControllerSettings(p *problems) {
	env := c.controllerSettingsEnv()
	if _, err := settings.FromEnv(func(k string) string { return env[k] }); err != nil {
		p.bad("controller settings (context %s): %v", c.controllerSettingNames(), err)
	}
}

func (c *Config) controllerSettingNames() []string {
	var out []string
	for _, k := range controllerSettingKeys {
		if _, ok := c.ControllerSettings[k.ctx]; ok {
			out = append(out, k.ctx)
		}
	}
	return out
}

// addControllerSettings puts the settings into a controller environment.
func (c *Config) addControllerSettings(env map[string]*string) {
	for k, v := range c.controllerSettingsEnv() {
		env[k] = jsii.String(v)
	}
}
