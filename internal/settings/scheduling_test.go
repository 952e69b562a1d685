package settings

import (
	"strings"
	"testing"
)

func TestSchedulingSettingsDefaultToKarpenters(t *testing.T) {
	s, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Scheduling{MinValuesPolicy: MinValuesStrict, PreferencePolicy: PreferencesRespect}
	if s.Scheduling != want {
		t.Fatalf("defaults %+v, want %+v", s.Scheduling, want)
	}
}

func TestSchedulingSettingsParse(t *testing.T) {
	s, err := FromEnv(env(map[string]string{EnvVMMemoryOverheadPercent: "0.05", EnvReservedENIs: "1",
		EnvMinValuesPolicy: "BestEffort", EnvPreferencePolicy: "Ignore"}))
	if err != nil {
		t.Fatal(err)
	}
	g := s.Scheduling
	if g.VMMemoryOverheadPercent == nil || *g.VMMemoryOverheadPercent != 0.05 || g.ReservedENIs != 1 ||
		g.MinValuesPolicy != MinValuesBestEffort || g.PreferencePolicy != PreferencesIgnore {
		t.Fatalf("%+v", g)
	}
}

func TestSchedulingSettingsRefuseWhatKarpenterRefuses(t *testing.T) {
	for name, v := range map[string]string{
		EnvVMMemoryOverheadPercent: "-0.1", EnvReservedENIs: "-1", EnvMinValuesPolicy: "Lenient", EnvPreferencePolicy: "ignore",
	} {
		_, err := FromEnv(env(map[string]string{name: v}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v, want an error naming it", name, v, err)
		}
	}
	if _, err := FromEnv(env(map[string]string{EnvVMMemoryOverheadPercent: "1"})); err == nil {
		t.Error("an overhead of 100 % accepted")
	}
}
