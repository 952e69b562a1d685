package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/settings"
)

// stackTrust is the trust a stack deploying props() sets.
func stackTrust() trust {
	want := map[string]string{}
	for k, v := range props() {
		if k != "ServiceToken" {
			want[k] = v.(string)
		}
	}
	want[caDigestProp] = admission.CABundleDigest(want[propCABundle])
	delete(want, propCABundle)
	return trust{
		webhookResourceType: want,
		accessResourceType: {propClusterName: "prod-1", propAccessName: "nodewright-controller-prod", propTableName: "nodewright-prod-Table",
			stackProp + propTableName: "nodewright-prod-Table"},
	}
}

func trustedRegistrar(kc *fake.Clientset) *registrar {
	r := testRegistrar(kc, true)
	r.trust = stackTrust()
	return r
}

// The registrar acts only on events whose properties are its stack's: an
// invoker changing the webhook's URL, CA, secret, name or cluster, the
// access binding's name or table, or naming another object to delete, is
// refused before the cluster is touched, with the property named.
func TestEventsOtherThanTheStacksAreRefused(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewSimpleClientset()
	if _, _, err := trustedRegistrar(kc).serve(ctx, cfn.Event{RequestType: cfn.RequestCreate, ResourceType: webhookResourceType, ResourceProperties: props()}); err != nil {
		t.Fatalf("the stack's own event: %v", err)
	}
	for _, prop := range []string{propFunctionURL, propCABundle, propSecretArn, propWebhookName, propClusterName, propPathPrefix} {
		t.Run(prop, func(t *testing.T) {
			kc := fake.NewSimpleClientset()
			p := props()
			p[prop] = "https://attacker.example/" + prop
			_, _, err := trustedRegistrar(kc).serve(ctx, cfn.Event{RequestType: cfn.RequestUpdate, ResourceType: webhookResourceType, PhysicalResourceID: "nodewright-prod-1", ResourceProperties: p})
			if err == nil || !strings.Contains(err.Error(), prop) || strings.Contains(err.Error(), "attacker") {
				t.Fatalf("err = %v, want a refusal naming %s (and not its value)", err, prop)
			}
			if len(kc.Actions()) != 0 {
				t.Errorf("touched the cluster: %v", kc.Actions())
			}
		})
	}
	refused := map[string]cfn.Event{
		"delete of another object": {RequestType: cfn.RequestDelete, ResourceType: webhookResourceType, PhysicalResourceID: "someone-elses", ResourceProperties: props()},
		"another access name": {RequestType: cfn.RequestCreate, ResourceType: accessResourceType,
			ResourceProperties: map[string]interface{}{propClusterName: "prod-1", propAccessName: "cluster-admins", propTableName: "nodewright-prod-Table"}},
		"another table": {RequestType: cfn.RequestDelete, ResourceType: accessResourceType, PhysicalResourceID: "nodewright-controller-prod",
			ResourceProperties: map[string]interface{}{propClusterName: "prod-1", propAccessName: "nodewright-controller-prod", propTableName: "other-Table"}},
		"delete of another binding": {RequestType: cfn.RequestDelete, ResourceType: accessResourceType, PhysicalResourceID: "cluster-admins",
			ResourceProperties: map[string]interface{}{propClusterName: "prod-1", propAccessName: "cluster-admins"}},
		"unknown type": {RequestType: cfn.RequestCreate, ResourceType: "Custom::Other", ResourceProperties: props()},
		"no type":      {RequestType: cfn.RequestCreate, ResourceProperties: props()},
	}
	for name, ev := range refused {
		t.Run(name, func(t *testing.T) {
			kc := fake.NewSimpleClientset()
			if _, _, err := trustedRegistrar(kc).serve(ctx, ev); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("err = %v, want refused", err)
			}
			if len(kc.Actions()) != 0 {
				t.Errorf("touched the cluster: %v", kc.Actions())
			}
		})
	}
	// After a switch from shadow mode, CloudFormation deletes the shadow
	// resource with its old properties: accepted.
	old := cfn.Event{RequestType: cfn.RequestDelete, ResourceType: accessResourceType, PhysicalResourceID: "nodewright-shadow-prod",
		ResourceProperties: map[string]interface{}{propClusterName: "prod-1", propAccessName: "nodewright-shadow-prod", propAccessMode: "shadow"}}
	if err := stackTrust().check(old); err != nil {
		t.Errorf("the other mode's delete: %v", err)
	}
	// A failed create's placeholder ID still gets its no-op delete.
	if _, _, err := trustedRegistrar(kc).serve(ctx, cfn.Event{RequestType: cfn.RequestDelete, ResourceType: webhookResourceType, PhysicalResourceID: "2024/01/01/[$LATEST]abc", ResourceProperties: props()}); err != nil {
		t.Errorf("placeholder delete: %v", err)
	}
}

// Without the stack's properties in its environment, the registrar refuses
// every event (with the reason) rather than trusting the event.
func TestRegistrarWithoutTrustRefusesEverything(t *testing.T) {
	r := testRegistrar(fake.NewSimpleClientset(), true)
	r.trust, r.trustErr = trustFromEnv(func(string) string { return "" })
	_, _, err := r.serve(context.Background(), cfn.Event{RequestType: cfn.RequestCreate, ResourceType: webhookResourceType, ResourceProperties: props()})
	if err == nil || !strings.Contains(err.Error(), settings.EnvRegistrarTrust) {
		t.Fatalf("err = %v, want the missing %s named", err, settings.EnvRegistrarTrust)
	}
	b, _ := json.Marshal(stackTrust())
	got, err := trustFromEnv(func(k string) string { return map[string]string{settings.EnvRegistrarTrust: string(b)}[k] })
	if err != nil || got[webhookResourceType][propFunctionURL] != props()[propFunctionURL] {
		t.Fatalf("trust from env: %v, %v", got, err)
	}
	if _, err := trustFromEnv(func(string) string { return "{not json" }); err == nil {
		t.Error("malformed trust accepted")
	}
}
