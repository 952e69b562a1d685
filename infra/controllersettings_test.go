package infra

import (
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/settings"
)

// Karpenter's settings by its Helm names reach the controller functions'
// environment, and what the functions would refuse fails the synth.
func TestControllerSettingsFromContext(t *testing.T) {
	ctx := map[string]interface{}{CtxClusterName: "prod", CtxConfigDir: "cfg", "batchIdleDuration": "2s", "batchMaxDuration": "20s",
		"vmMemoryOverheadPercent": "0.05", "reservedENIs": "1", "minValuesPolicy": "BestEffort", "preferencePolicy": "Ignore"}
	c, err := FromContext(func(k string) interface{} { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	env := c.controllerSettingsEnv()
	want := map[string]string{settings.EnvBatchIdle: "2s", settings.EnvBatchMax: "20s", settings.EnvVMMemoryOverheadPercent: "0.05",
		settings.EnvReservedENIs: "1", settings.EnvMinValuesPolicy: "BestEffort", settings.EnvPreferencePolicy: "Ignore"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	s, err := settings.FromEnv(func(k string) string { return env[k] })
	if err != nil || s.Scheduling.MinValuesPolicy != settings.MinValuesBestEffort || s.Scheduling.ReservedENIs != 1 {
		t.Errorf("the functions read %+v, %v", s.Scheduling, err)
	}

	ctx["minValuesPolicy"] = "Sometimes"
	c, err = FromContext(func(k string) interface{} { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), settings.EnvMinValuesPolicy) {
		t.Errorf("validation %v, want it to refuse minValuesPolicy", err)
	}
	if got := (&Config{}).controllerSettingsEnv(); len(got) != 0 {
		t.Errorf("no context gave %v: unset must keep the functions' defaults", got)
	}
}
