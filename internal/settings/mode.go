package settings

import "fmt"

// EnvMode is how the functions act on the cluster: unset (or "normal") for
// nodewright's normal behaviour, ModeShadow to compute every decision on the
// real cluster and AWS data, record it, and act on nothing (the CDK app's
// `-c mode=shadow`).
const EnvMode = "NODEWRIGHT_MODE"

// Modes of EnvMode.
const (
	ModeNormal = "normal"
	ModeShadow = "shadow"
)

// parseMode reads EnvMode's value ("" is ModeNormal).
func parseMode(v string) (string, error) {
	switch v {
	case "", ModeNormal:
		return ModeNormal, nil
	case ModeShadow:
		return ModeShadow, nil
	}
	return "", fmt.Errorf("%s=%q: want %s or %s", EnvMode, v, ModeNormal, ModeShadow)
}

// Shadow reports whether the functions run in shadow mode.
func (s Settings) Shadow() bool { return s.Mode == ModeShadow }
