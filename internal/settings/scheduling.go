package settings

import (
	"fmt"
	"strconv"
)

// Karpenter's controller settings that change planning, by its environment
// variable names with the NODEWRIGHT_ prefix (Karpenter v1.14.1
// pkg/operator/options/options.go and the provider's
// pkg/operator/options/options.go: VM_MEMORY_OVERHEAD_PERCENT, RESERVED_ENIS,
// MIN_VALUES_POLICY, PREFERENCE_POLICY), so a Karpenter user's values carry over.
const (
	EnvVMMemoryOverheadPercent = "NODEWRIGHT_VM_MEMORY_OVERHEAD_PERCENT"
	EnvReservedENIs            = "NODEWRIGHT_RESERVED_ENIS"
	EnvMinValuesPolicy         = "NODEWRIGHT_MIN_VALUES_POLICY"
	EnvPreferencePolicy        = "NODEWRIGHT_PREFERENCE_POLICY"
)

// The values Karpenter accepts for its two policies (defaults first).
const (
	MinValuesStrict     = "Strict"
	MinValuesBestEffort = "BestEffort"
	PreferencesRespect  = "Respect"
	PreferencesIgnore   = "Ignore"
)

// Scheduling are Karpenter's planning settings.
type Scheduling struct {
	// VMMemoryOverheadPercent is the share of memory a new node is planned
	// to lose to the hypervisor; nil is Karpenter's default (0.075).
	VMMemoryOverheadPercent *float64
	// ReservedENIs are ENIs the VPC CNI must not use for pods: they lower
	// ENI-limited max pods.
	ReservedENIs int
	// MinValuesPolicy is MinValuesStrict (a claim that cannot keep a
	// requirement's minValues is not made) or MinValuesBestEffort (it is
	// made with the values there are).
	MinValuesPolicy string
	// PreferencePolicy is PreferencesRespect or PreferencesIgnore (preferred
	// affinities and ScheduleAnyway spreads are not planned for).
	PreferencePolicy string
}

// schedulingFromEnv reads Scheduling, refusing values Karpenter refuses.
func schedulingFromEnv(getenv func(string) string) (Scheduling, error) {
	s := Scheduling{MinValuesPolicy: MinValuesStrict, PreferencePolicy: PreferencesRespect}
	if v := getenv(EnvVMMemoryOverheadPercent); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		// Karpenter: "vm-memory-overhead-percent cannot be negative"; a
		// share of 1 or more leaves no memory.
		if err != nil || f < 0 || f >= 1 {
			return s, fmt.Errorf("%s=%q: want a fraction in [0, 1)", EnvVMMemoryOverheadPercent, v)
		}
		s.VMMemoryOverheadPercent = &f
	}
	if v := getenv(EnvReservedENIs); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s, fmt.Errorf("%s=%q: want a non-negative integer", EnvReservedENIs, v)
		}
		s.ReservedENIs = n
	}
	var err error
	if s.MinValuesPolicy, err = oneOf(getenv, EnvMinValuesPolicy, MinValuesStrict, MinValuesBestEffort); err != nil {
		return s, err
	}
	if s.PreferencePolicy, err = oneOf(getenv, EnvPreferencePolicy, PreferencesRespect, PreferencesIgnore); err != nil {
		return s, err
	}
	return s, nil
}

// oneOf reads name, which must be one of the values (the first when unset).
func oneOf(getenv func(string) string, name string, values ...string) (string, error) {
	v := getenv(name)
	if v == "" {
		return values[0], nil
	}
	for _, ok := range values {
		if v == ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s=%q: want one of %v", name, v, values)
}
