package settings

// Size is a function's Lambda memory (MB) and timeout (seconds).
type Size struct{ MemoryMB, TimeoutSeconds int }

// DefaultSize is function fn's Lambda size: what the stack deploys (infra's
// Sizing, overridden per function by the functionSizes context) and what
// the cost model bills. Zero for a name that is not a function. Lambda
// gives CPU in proportion to memory (1 vCPU at 1,769 MB), so the scheduled
// functions get memory for CPU share as much as for heap; their passes at
// 2,000 nodes / 40,000 pods, and the headroom over them, are in
// infra/SCALE.md.
func DefaultSize(fn string) Size {
	switch fn {
	case "webhook":
		return Size{MemoryMB: 256, TimeoutSeconds: 5}
	case "provisioner":
		return Size{MemoryMB: 2048, TimeoutSeconds: 300}
	case "interruption":
		return Size{MemoryMB: 1024, TimeoutSeconds: 40}
	case "disruption":
		return Size{MemoryMB: 2048, TimeoutSeconds: 300}
	case "lifecycle":
		return Size{MemoryMB: 1024, TimeoutSeconds: 120}
	case "webhookregistrar":
		return Size{MemoryMB: 256, TimeoutSeconds: 120}
	}
	return Size{}
}
