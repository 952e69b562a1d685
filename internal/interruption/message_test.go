package interruption

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParseKinds(t *testing.T) {
	cases := []struct {
		name       string
		body       string
		kind       Kind
		ids        []string
		actionable bool
		gone       bool
	}{
		{"spot", `{"version":"0","id":"1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-21T00:00:00Z","detail":{"instance-id":"i-0abc","instance-action":"terminate"}}`, SpotInterruption, []string{"i-0abc"}, true, false},
		{"rebalance", `{"id":"2","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","detail":{"instance-id":"i-0abd"}}`, RebalanceRecommended, []string{"i-0abd"}, true, false},
		{"stopping", `{"id":"3","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-1","state":"stopping"}}`, StateChange, []string{"i-1"}, true, false},
		{"terminated", `{"id":"4","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-1","state":"terminated"}}`, StateChange, []string{"i-1"}, true, true},
		{"running", `{"id":"5","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-1","state":"running"}}`, StateChange, []string{"i-1"}, false, false},
		{"health", `{"id":"6","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"},{"entityValue":"i-2"}]}}`, ScheduledChange, []string{"i-1", "i-2"}, true, false},
		{"health other service", `{"id":"7","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"RDS","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"db-1"}]}}`, Unknown, nil, false, false},
		{"capacity reservation", `{"id":"9","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-0cr1","instance-action":"terminate","instance-termination-time":"2026-11-21T00:02:00Z","azId":"usw2-az1"}}`, CapacityReservationInterruption, []string{"i-0cr1"}, true, false},
		{"other event", `{"id":"8","detail-type":"EC2 AMI State Change","source":"aws.ec2","detail":{}}`, Unknown, nil, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != tc.kind || len(m.InstanceIDs) != len(tc.ids) || m.Actionable() != tc.actionable || m.Gone() != tc.gone {
				t.Fatalf("got %+v actionable=%v gone=%v", m, m.Actionable(), m.Gone())
			}
			for i := range tc.ids {
				if m.InstanceIDs[i] != tc.ids[i] {
					t.Fatalf("ids %v", m.InstanceIDs)
				}
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	for _, body := range []string{
		``, `not json`, `{}`, `{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{}}`,
		`{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":"x"}`,
		`{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-1"}}`,
		`{"detail-type":"AWS Health Event","source":"aws.health","detail":"x"}`,
		`{"detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2","detail":{"instance-action":"terminate"}}`,
	} {
		if _, err := Parse(body); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err %v, want ErrMalformed", body, err)
		}
	}
}

// The committed sample payloads must parse as the kinds they are named for.
func TestParseSamples(t *testing.T) {
	samples := map[string]Kind{
		"spot-interruption-warning.json":                 SpotInterruption,
		"rebalance-recommendation.json":                  RebalanceRecommended,
		"state-change-stopping.json":                     StateChange,
		"state-change-terminated.json":                   StateChange,
		"health-scheduled-change.json":                   ScheduledChange,
		"health-scheduled-change-dedicated-host.json":    ScheduledChange,
		"capacity-reservation-interruption-warning.json": CapacityReservationInterruption,
	}
	for file, kind := range samples {
		b, err := os.ReadFile(filepath.Join("..", "..", "events", file))
		if os.IsNotExist(err) {
			t.Skipf("events/%s not present yet", file)
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := Parse(string(b))
		if err != nil || m.Kind != kind {
			t.Errorf("%s: %+v %v", file, m, err)
		}
	}
}

// A capacity reservation warning drains like a spot warning: Karpenter-AWS
// v1.14.1 actionForMessage gives CapacityReservationInterruptionKind
// CordonAndDrain.
func TestCapacityReservationInterruptionDrains(t *testing.T) {
	m := Message{Kind: CapacityReservationInterruption, InstanceIDs: []string{"i-1"}}
	for _, policy := range []string{RebalanceIgnore, RebalanceReplace} {
		if a := ActionFor(m, policy); a != ActionDrain {
			t.Errorf("rebalance %s: action %s, want drain", policy, a)
		}
	}
}
