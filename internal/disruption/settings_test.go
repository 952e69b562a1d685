package disruption

import (
	"strings"
	"testing"
	"time"
)

func TestSettingsFromEnv(t *testing.T) {
	env := map[string]string{
		EnvValidationDelay: "0s", EnvReplacementTimeout: "5m", EnvRepackMinSavingsPercent: "20",
		EnvRepackMinSavingsPerHour: "0.5", EnvRepackDisabled: "true",
	}
	s, err := SettingsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	s.Defaults()
	if s.ValidationDelay >= 0 || s.ReplacementTimeout != 5*time.Minute || s.RepackMinSavingsFraction != 0.2 || s.RepackMinSavings != 0.5 || !s.DisableRepack {
		t.Fatalf("settings %+v", s)
	}
	s, err = SettingsFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s.Defaults()
	if s.ValidationDelay != 15*time.Second || s.RepackMinSavingsFraction != 0.1 || s.RepackMinSavings != 0.05 || s.DisableRepack {
		t.Fatalf("defaults %+v", s)
	}
	for k, v := range map[string]string{EnvValidationDelay: "soon", EnvRepackMinSavingsPercent: "-1", EnvRepackDisabled: "maybe"} {
		_, err := SettingsFromEnv(func(x string) string {
			if x == k {
				return v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: error %v should name the variable", k, v, err)
		}
	}
}
