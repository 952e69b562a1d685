package provisioning

import "testing"

// karpenter_nodeclaims_created_total tells pending-pod provisioning from the
// replacements the disruption and interruption functions ask for.
func TestCreatedReason(t *testing.T) {
	for src, want := range map[string]string{TriggerSchedule: "provisioning", TriggerNudge: "provisioning", TriggerManual: "replacement"} {
		if got := createdReason(Trigger{Source: src}); got != want {
			t.Errorf("%s: %s, want %s", src, got, want)
		}
	}
}
