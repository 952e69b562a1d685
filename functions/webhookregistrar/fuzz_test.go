package main

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// FuzzCustomResourceEvent decodes arbitrary CloudFormation custom-resource
// events as the Lambda runtime does and handles them against a fake
// cluster. Properties: no panic; a Create or Update either fails with an
// error (CloudFormation shows it and rolls back) or returns a physical ID
// naming an object that exists and that nodewright manages.
//
//	go test -run '^$' -fuzz '^FuzzCustomResourceEvent$' -fuzztime 60s ./functions/webhookregistrar
func FuzzCustomResourceEvent(f *testing.F) {
	for _, ev := range []cfn.Event{
		{RequestType: cfn.RequestCreate, ResourceType: "Custom::NodewrightWebhook", ResourceProperties: props()},
		{RequestType: cfn.RequestUpdate, ResourceType: "Custom::NodewrightWebhook", PhysicalResourceID: "nodewright-prod-1", ResourceProperties: props()},
		{RequestType: cfn.RequestDelete, ResourceType: "Custom::NodewrightWebhook", PhysicalResourceID: "nodewright-prod-1", ResourceProperties: props()},
		{RequestType: cfn.RequestCreate, ResourceType: accessResourceType, ResourceProperties: map[string]interface{}{propClusterName: "prod-1", propAccessName: "nodewright-controller-x"}},
		{RequestType: cfn.RequestDelete, ResourceType: accessResourceType, PhysicalResourceID: "x", ResourceProperties: map[string]interface{}{propClusterName: "prod-1"}},
		{RequestType: cfn.RequestCreate, ResourceType: accessResourceType, ResourceProperties: map[string]interface{}{propClusterName: "prod-1", propAccessName: "nodewright-shadow-x", propAccessMode: "shadow"}},
	} {
		raw, _ := json.Marshal(ev)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var ev cfn.Event
		if json.Unmarshal(raw, &ev) != nil {
			return // the runtime rejects it before the handler runs
		}
		kc := fake.NewSimpleClientset()
		id, _, err := testRegistrar(kc, true).handle(t.Context(), ev)
		if err != nil || (ev.RequestType != cfn.RequestCreate && ev.RequestType != cfn.RequestUpdate) {
			return
		}
		var labels map[string]string
		if ev.ResourceType == accessResourceType {
			role, gerr := kc.RbacV1().ClusterRoles().Get(t.Context(), id, metav1.GetOptions{})
			if gerr != nil {
				t.Fatalf("access resource %q succeeded without its ClusterRole: %v", id, gerr)
			}
			labels = role.Labels
		} else {
			cfg, gerr := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), id, metav1.GetOptions{})
			if gerr != nil {
				t.Fatalf("webhook resource %q succeeded without its configuration: %v", id, gerr)
			}
			labels = cfg.Labels
		}
		if labels[managedByLabel] != managedByValue {
			t.Fatalf("%q is not labelled as nodewright's", id)
		}
	})
}
