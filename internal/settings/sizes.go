package settings

// Size is a function's Lambda memory (MB) and timeout (seconds).
type Size struct{ MemoryMB, TimeoutSeconds int }

// DefaultSize is function fn's Lambda size: what the stack deploys (infra's
// Sizing, overridden per function by the functionSizes context) and what
// the cost model bills. Zero for a name that is not a function. Lambda
// gives CPU in proportion to memory (1 vCPU at 1,769 MB), so the scheduled
// functions get memory for CPU share as much as for heap; their passes at
// 2,000 nodes / 40,000 pods, and the room over them, are in
// infra/SCALE.md.
func DefaultSize(fn string) Size {
	return map[string]Size{
		// Answers within the API server's 2 s webhook timeout.
		"webhook": {MemoryMB: 256, TimeoutSeconds: 5},
		// 5,000 pending pods at 2,000 nodes: +1,273 MiB, 40 s.
		"provisioner": {MemoryMB: 2048, TimeoutSeconds: 300},
		// A batch must finish well inside a spot warning's 120 s.
		"interruption": {MemoryMB: 1024, TimeoutSeconds: 40},
		// +912 MiB, ~3 min at 2,000 nodes; under its 6-minute lease
		// (never renewed), its searches stopping at 1 + 3 minutes.
		"disruption": {MemoryMB: 2048, TimeoutSeconds: 300},
		// +250 MiB, 11 s at 2,000 nodes.
		"lifecycle": {MemoryMB: 1024, TimeoutSeconds: 120},
		// A few API calls while the stack deploys or goes.
		"webhookregistrar": {MemoryMB: 256, TimeoutSeconds: 120},
	}[fn]
}
