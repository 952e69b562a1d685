package infra

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// CtxFunctionSizes overrides functions' memory and timeout, for clusters
// larger than the ones Sizing was measured on (infra/SCALE.md):
// -c functionSizes=provisioner=3008:300,disruption=3008:300 (MB:seconds),
// or a JSON object of the same pairs in cdk.json.
const CtxFunctionSizes = "functionSizes"

// CtxReservedConcurrency overrides functions' reserved concurrency:
// -c reservedConcurrency=webhook=0,interruption=2 (0: unreserved). An
// account below the defaults' 16 + 100 concurrent executions cannot deploy
// them (Lambda keeps 100 unreserved: Lambda developer guide, "Configuring
// reserved concurrency"); unreserved functions still run, without the
// webhook's cap or interruption's floor, and disruption's DynamoDB lease
// still serializes its runs.
const CtxReservedConcurrency = "reservedConcurrency"

// maxReservedConcurrency bounds an override (Lambda's default account
// limit).
const maxReservedConcurrency = 1000

// Lambda's bounds on memory (MB) and timeout (seconds).
const (
	minMemoryMB, maxMemoryMB = 128, 10240
	maxTimeoutSeconds        = 900
)

// Sized is fn's sizing: Sizing's, with the memory and timeout the
// configuration's FunctionSizes give it.
func (c *Config) Sized(fn string) FunctionSizing {
	s := Sizing[fn]
	if v, ok := c.FunctionSizes[fn]; ok {
		if mb, secs, err := parseSize(v); err == nil {
			s.MemoryMB, s.TimeoutSeconds = mb, secs
		}
	}
	if v, ok := c.ReservedConcurrency[fn]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			s.ReservedConcurrency = n
		}
	}
	return s
}

// validateReservedConcurrency checks ReservedConcurrency against the
// functions and Lambda's bounds.
func (c *Config) validateReservedConcurrency(p *problems) {
	for fn, v := range c.ReservedConcurrency {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case !slices.Contains(Functions, fn):
			p.bad("%s: %q is not one of the functions %v", CtxReservedConcurrency, fn, Functions)
		case err != nil:
			p.bad("%s: %s: %q is not a number", CtxReservedConcurrency, fn, v)
		case n < 0 || n > maxReservedConcurrency:
			p.bad("%s: %s: %d is outside 0 (unreserved) to %d", CtxReservedConcurrency, fn, n, maxReservedConcurrency)
		}
	}
}

// parseSize reads "MB:seconds".
func parseSize(v string) (mb, secs int, err error) {
	m, t, ok := strings.Cut(v, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not MB:seconds", v)
	}
	if mb, err = strconv.Atoi(strings.TrimSpace(m)); err != nil {
		return 0, 0, fmt.Errorf("%q: memory: %w", v, err)
	}
	if secs, err = strconv.Atoi(strings.TrimSpace(t)); err != nil {
		return 0, 0, fmt.Errorf("%q: timeout: %w", v, err)
	}
	return mb, secs, nil
}

// validateFunctionSizes checks FunctionSizes against the functions and
// Lambda's bounds.
func (c *Config) validateFunctionSizes(p *problems) {
	for fn, v := range c.FunctionSizes {
		if !slices.Contains(Functions, fn) {
			p.bad("%s: %q is not one of the functions %v", CtxFunctionSizes, fn, Functions)
			continue
		}
		mb, secs, err := parseSize(v)
		switch {
		case err != nil:
			p.bad("%s: %s: %v", CtxFunctionSizes, fn, err)
		case mb < minMemoryMB || mb > maxMemoryMB:
			p.bad("%s: %s: memory %d MB is outside Lambda's %d-%d", CtxFunctionSizes, fn, mb, minMemoryMB, maxMemoryMB)
		case secs < 1 || secs > maxTimeoutSeconds:
			p.bad("%s: %s: timeout %d s is outside Lambda's 1-%d", CtxFunctionSizes, fn, secs, maxTimeoutSeconds)
		}
	}
}
