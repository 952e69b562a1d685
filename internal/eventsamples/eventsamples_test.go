package eventsamples

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

var eventsDir = filepath.Join("..", "..", "events")

// decodeStrict fails on fields the target type does not know, so a typo in
// a sample (or a shape the handlers would silently ignore) is caught.
func decodeStrict(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
}

func readSample(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(eventsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// EventBridge detail shapes (from the EC2 and AWS Health event references).
type instanceDetail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action,omitempty"`
	State          string `json:"state,omitempty"`
}

type healthDetail struct {
	EventArn          string `json:"eventArn"`
	Service           string `json:"service"`
	EventTypeCode     string `json:"eventTypeCode"`
	EventTypeCategory string `json:"eventTypeCategory"`
	EventScopeCode    string `json:"eventScopeCode"`
	CommunicationID   string `json:"communicationId"`
	StartTime         string `json:"startTime"`
	EndTime           string `json:"endTime"`
	LastUpdatedTime   string `json:"lastUpdatedTime"`
	StatusCode        string `json:"statusCode"`
	EventRegion       string `json:"eventRegion"`
	EventDescription  []struct {
		Language          string `json:"language"`
		LatestDescription string `json:"latestDescription"`
	} `json:"eventDescription"`
	AffectedEntities []struct {
		EntityValue string            `json:"entityValue"`
		Tags        map[string]string `json:"tags"`
	} `json:"affectedEntities"`
}

func TestEventBridgeSamples(t *testing.T) {
	cases := []struct {
		file, detailType, source, instance, action, state string
	}{
		{"spot-interruption-warning.json", "EC2 Spot Instance Interruption Warning", "aws.ec2", "i-0b662ef9931388ba0", "terminate", ""},
		{"rebalance-recommendation.json", "EC2 Instance Rebalance Recommendation", "aws.ec2", "i-0b662ef9931388ba0", "", ""},
		{"state-change-stopping.json", "EC2 Instance State-change Notification", "aws.ec2", "i-04a71190d4888e0e3", "", "stopping"},
		{"state-change-terminated.json", "EC2 Instance State-change Notification", "aws.ec2", "i-0c3d5e7f9a1b2c4d6", "", "terminated"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			var ev events.CloudWatchEvent
			decodeStrict(t, readSample(t, tc.file), &ev)
			if ev.Version != "0" || ev.DetailType != tc.detailType || ev.Source != tc.source || ev.Region != "us-west-2" || ev.AccountID != "123456789012" || ev.ID == "" || ev.Time.IsZero() {
				t.Errorf("envelope: %+v", ev)
			}
			if len(ev.Resources) != 1 || filepath.Base(ev.Resources[0]) != tc.instance {
				t.Errorf("resources %v", ev.Resources)
			}
			var d instanceDetail
			decodeStrict(t, ev.Detail, &d)
			if d.InstanceID != tc.instance || d.InstanceAction != tc.action || d.State != tc.state {
				t.Errorf("detail %+v", d)
			}
		})
	}
}

// The capacity reservation warning's detail (EC2 User Guide, "Monitor
// interruptible Capacity Reservations with EventBridge and CloudTrail").
type capacityReservationDetail struct {
	InstanceID              string    `json:"instance-id"`
	InstanceAction          string    `json:"instance-action"`
	InstanceTerminationTime time.Time `json:"instance-termination-time"`
	AZID                    string    `json:"azId"`
}

func TestCapacityReservationInterruptionSample(t *testing.T) {
	var ev events.CloudWatchEvent
	decodeStrict(t, readSample(t, "capacity-reservation-interruption-warning.json"), &ev)
	if ev.DetailType != "EC2 Capacity Reservation Instance Interruption Warning" || ev.Source != "aws.ec2" || ev.Region != "us-west-2" || ev.AccountID != "123456789012" {
		t.Errorf("envelope %+v", ev)
	}
	var d capacityReservationDetail
	decodeStrict(t, ev.Detail, &d)
	if d.InstanceID != "i-0a1b2c3d4e5f60718" || d.InstanceAction != "terminate" || d.AZID == "" || len(ev.Resources) != 1 || filepath.Base(ev.Resources[0]) != d.InstanceID {
		t.Errorf("detail %+v resources %v", d, ev.Resources)
	}
	// The warning comes two minutes before the termination.
	if got := d.InstanceTerminationTime.Sub(ev.Time); got != 2*time.Minute {
		t.Errorf("instance-termination-time is %s after the event, want 2m", got)
	}
}

func TestHealthSample(t *testing.T) {
	var ev events.CloudWatchEvent
	decodeStrict(t, readSample(t, "health-scheduled-change.json"), &ev)
	if ev.DetailType != "AWS Health Event" || ev.Source != "aws.health" {
		t.Errorf("envelope %+v", ev)
	}
	var d healthDetail
	decodeStrict(t, ev.Detail, &d)
	if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" || len(d.AffectedEntities) != 1 || d.AffectedEntities[0].EntityValue != "i-0e8f1a2b3c4d5e6f7" {
		t.Errorf("detail %+v", d)
	}
	start, err := time.Parse(time.RFC1123, d.StartTime)
	if err != nil || !start.After(ev.Time) {
		t.Errorf("startTime %q (%v) should parse and lie after the event time %s", d.StartTime, err, ev.Time)
	}
}

func TestSQSBatchWrapsTheEvents(t *testing.T) {
	var batch events.SQSEvent
	decodeStrict(t, readSample(t, "sqs-batch.json"), &batch)
	want := []string{"spot-interruption-warning.json", "rebalance-recommendation.json", "state-change-stopping.json", "state-change-terminated.json"}
	if len(batch.Records) != len(want) {
		t.Fatalf("%d records, want %d", len(batch.Records), len(want))
	}
	seen := map[string]bool{}
	for i, r := range batch.Records {
		if r.EventSource != "aws:sqs" || r.AWSRegion != "us-west-2" || r.EventSourceARN != "arn:aws:sqs:us-west-2:123456789012:nodewright-demo-interruption" {
			t.Errorf("record %d source: %+v", i, r)
		}
		if r.MessageId == "" || seen[r.MessageId] || r.ReceiptHandle == "" {
			t.Errorf("record %d ids: %q %q", i, r.MessageId, r.ReceiptHandle)
		}
		seen[r.MessageId] = true
		sum := md5.Sum([]byte(r.Body))
		if hex.EncodeToString(sum[:]) != r.Md5OfBody {
			t.Errorf("record %d md5OfBody %s does not match the body", i, r.Md5OfBody)
		}
		var inBatch, alone events.CloudWatchEvent
		decodeStrict(t, []byte(r.Body), &inBatch)
		decodeStrict(t, readSample(t, want[i]), &alone)
		a, _ := json.Marshal(inBatch)
		b, _ := json.Marshal(alone)
		if !bytes.Equal(a, b) {
			t.Errorf("record %d body differs from %s", i, want[i])
		}
		sent, err := strconv.ParseInt(r.Attributes["SentTimestamp"], 10, 64)
		if err != nil || r.Attributes["ApproximateReceiveCount"] != "1" {
			t.Errorf("record %d attributes %v", i, r.Attributes)
		}
		// EventBridge delivers to SQS at the event's time.
		if d := time.UnixMilli(sent).Sub(inBatch.Time); d < 0 || d > time.Minute {
			t.Errorf("record %d SentTimestamp %s is %s after the event time %s", i, time.UnixMilli(sent).UTC(), d, inBatch.Time)
		}
	}
}

func TestAdmissionReviewSample(t *testing.T) {
	var review admissionv1.AdmissionReview
	decodeStrict(t, readSample(t, "admission-review-pods-status-unschedulable.json"), &review)
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		t.Errorf("type meta %+v", review.TypeMeta)
	}
	req := review.Request
	if req == nil {
		t.Fatal("no request")
	}
	if req.Operation != admissionv1.Update || req.SubResource != "status" || req.Resource.Resource != "pods" || req.Kind.Kind != "Pod" || req.UID == "" {
		t.Errorf("request %+v", req)
	}
	var pod, old corev1.Pod
	decodeStrict(t, req.Object.Raw, &pod)
	decodeStrict(t, req.OldObject.Raw, &old)
	if pod.Name != req.Name || pod.Namespace != req.Namespace {
		t.Errorf("object %s/%s does not match request %s/%s", pod.Namespace, pod.Name, req.Namespace, req.Name)
	}
	if !unschedulable(&pod) {
		t.Errorf("object is not PodScheduled=False/Unschedulable: %+v", pod.Status)
	}
	if unschedulable(&old) {
		t.Error("oldObject is already Unschedulable; the sample should show the transition")
	}
	if pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending {
		t.Errorf("pod should be pending and unbound: node %q phase %s", pod.Spec.NodeName, pod.Status.Phase)
	}
	if cpu := pod.Spec.Containers[0].Resources.Requests.Cpu(); cpu.String() != "1" {
		t.Errorf("cpu request %s", cpu)
	}
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// TestAllSamplesPresent checks the expected samples exist and that any other
// JSON file added to events/ is at least valid JSON.
func TestAllSamplesPresent(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(eventsDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{
		"spot-interruption-warning.json": true, "rebalance-recommendation.json": true,
		"state-change-stopping.json": true, "state-change-terminated.json": true,
		"health-scheduled-change.json": true, "sqs-batch.json": true,
		"capacity-reservation-interruption-warning.json":  true,
		"admission-review-pods-status-unschedulable.json": true,
	}
	for _, f := range files {
		if !known[filepath.Base(f)] && filepath.Ext(f) == ".json" {
			if data, err := os.ReadFile(f); err != nil || !json.Valid(data) {
				t.Errorf("%s is not valid JSON (%v)", f, err)
			}
		}
		delete(known, filepath.Base(f))
	}
	for f := range known {
		t.Errorf("events/%s is missing", f)
	}
}
