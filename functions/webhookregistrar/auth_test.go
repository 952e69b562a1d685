package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// refuseFirst makes the API server refuse the first n calls, as EKS does
// while a new access entry propagates.
func refuseFirst(kc *fake.Clientset, n int, unauthorized bool) *int {
	calls := 0
	kc.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls > n {
			return false, nil, nil
		}
		if unauthorized {
			return true, nil, apierrors.NewUnauthorized("Unauthorized")
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}, "x", nil)
	})
	return &calls
}

// The first calls after the registrar's access entry is created may be
// refused while it propagates: the registrar retries them instead of
// failing the custom resource (and rolling the deployment back), and gives
// up, naming why, when the refusal lasts.
func TestRegistrarWaitsForItsAccessToPropagate(t *testing.T) {
	ctx := context.Background()
	for _, unauthorized := range []bool{true, false} {
		kc := fake.NewSimpleClientset()
		refuseFirst(kc, 3, unauthorized)
		r := trustedRegistrar(kc)
		r.authRetry = time.Millisecond
		if _, _, err := r.serve(ctx, cfn.Event{RequestType: cfn.RequestCreate, ResourceType: webhookResourceType, ResourceProperties: props()}); err != nil {
			t.Fatalf("unauthorized=%v: create failed on refusals that pass: %v", unauthorized, err)
		}
		if _, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "nodewright-prod-1", metav1.GetOptions{}); err != nil {
			t.Fatalf("not registered after the retries: %v", err)
		}
	}

	kc := fake.NewSimpleClientset()
	calls := refuseFirst(kc, 1<<30, false)
	r := trustedRegistrar(kc)
	r.authWait, r.authRetry = 50*time.Millisecond, time.Millisecond
	_, _, err := r.serve(ctx, cfn.Event{RequestType: cfn.RequestCreate, ResourceType: webhookResourceType, ResourceProperties: props()})
	if err == nil || !strings.Contains(err.Error(), "access entry") || !apierrors.IsForbidden(err) {
		t.Fatalf("err = %v, want the lasting refusal named", err)
	}
	if *calls < 2 {
		t.Errorf("%d calls, want retries", *calls)
	}
}
