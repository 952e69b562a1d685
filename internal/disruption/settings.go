package disruption

import (
	"fmt"
	"strconv"
	"time"
)

// Environment variables tuning the disruption function (all optional).
const (
	EnvValidationDelay         = "NODEWRIGHT_DISRUPTION_VALIDATION_DELAY"
	EnvReplacementTimeout      = "NODEWRIGHT_DISRUPTION_REPLACEMENT_TIMEOUT"
	EnvRepackMinSavingsPercent = "NODEWRIGHT_DISRUPTION_REPACK_MIN_SAVINGS_PERCENT"
	EnvRepackMinSavingsPerHour = "NODEWRIGHT_DISRUPTION_REPACK_MIN_SAVINGS_PER_HOUR"
	EnvRepackDisabled          = "NODEWRIGHT_DISRUPTION_REPACK_DISABLED"
)

// SettingsFromEnv reads the optional environment variables that tune the
// disruption function (unset ones keep the defaults).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	var s Settings
	dur := func(name string, dst *time.Duration) error {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("%s=%q: want a non-negative duration such as 15s", name, v)
			}
			*dst = d
			if d == 0 {
				*dst = -1 // explicit zero: validate at once
			}
		}
		return nil
	}
	num := func(name string, dst *float64) error {
		if v := getenv(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				return fmt.Errorf("%s=%q: want a non-negative number", name, v)
			}
			*dst = f
		}
		return nil
	}
	if err := dur(EnvValidationDelay, &s.ValidationDelay); err != nil {
		return s, err
	}
	if err := dur(EnvReplacementTimeout, &s.ReplacementTimeout); err != nil {
		return s, err
	}
	if err := num(EnvRepackMinSavingsPercent, &s.RepackMinSavingsFraction); err != nil {
		return s, err
	}
	s.RepackMinSavingsFraction /= 100
	if err := num(EnvRepackMinSavingsPerHour, &s.RepackMinSavings); err != nil {
		return s, err
	}
	if v := getenv(EnvRepackDisabled); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("%s=%q: want true or false", EnvRepackDisabled, v)
		}
		s.DisableRepack = b
	}
	return s, nil
}
