package infra

import (
	"maps"
	"testing"

	"github.com/nodewright/nodewright/internal/doctor"
)

// nodewright doctor checks the account's Lambda concurrency against what
// the stack's functions reserve; its table must be Sizing's.
func TestDoctorKnowsTheReservedConcurrency(t *testing.T) {
	want := map[string]int{}
	for fn, s := range Sizing {
		if s.ReservedConcurrency > 0 {
			want[fn] = s.ReservedConcurrency
		}
	}
	if !maps.Equal(want, doctor.ReservedConcurrency) {
		t.Errorf("doctor.ReservedConcurrency is %v, the stack reserves %v: change internal/doctor with Sizing", doctor.ReservedConcurrency, want)
	}
}
