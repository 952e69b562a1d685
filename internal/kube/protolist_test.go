package kube

import (
	"bytes"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// The direct decoder gives what client-go's decoder and then strip give,
// pod for pod, for a protobuf list as the API server writes it; anything
// else is left to client-go.
func TestDecodePodListMatchesClientGo(t *testing.T) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"}}
	for i := range 50 {
		list.Items = append(list.Items, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns", Labels: map[string]string{"app": "a"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "img",
				Env: []corev1.EnvVar{{Name: "X", Value: "y"}}, Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100+i))}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c"}}},
		})
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &buf); err != nil {
		t.Fatal(err)
	}
	want := &corev1.PodList{}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(buf.Bytes(), nil, want); err != nil {
		t.Fatal(err)
	}
	for i := range want.Items {
		stripPod(&want.Items[i])
	}
	got := &corev1.PodList{}
	ok, err := decodePodList(buf.Bytes(), got, stripPod)
	if !ok || err != nil {
		t.Fatalf("direct decode: %v %v", ok, err)
	}
	if !equality.Semantic.DeepEqual(got.ListMeta, want.ListMeta) || !equality.Semantic.DeepEqual(got.Items, want.Items) {
		t.Errorf("direct decode differs:\n got  %+v\n want %+v", got.Items[0], want.Items[0])
	}
	if len(got.Items[3].Spec.Containers[0].Env) != 0 || got.Items[3].Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 103 {
		t.Errorf("pod 3 not stripped as strip says: %+v", got.Items[3].Spec.Containers[0])
	}

	for name, b := range map[string][]byte{
		"json":      []byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`),
		"truncated": buf.Bytes()[:len(buf.Bytes())/2],
	} {
		ok, err := decodePodList(b, &corev1.PodList{}, nil)
		if name == "json" && (ok || err != nil) {
			t.Errorf("%s: decoded directly (%v, %v); client-go should", name, ok, err)
		}
		if name == "truncated" && ok && err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
	encoded := runtime.Unknown{Raw: []byte{1, 2}, ContentEncoding: "gzip"}
	eb, err := encoded.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := decodePodList(append(append([]byte(nil), protobufMagic...), eb...), &corev1.PodList{}, nil); ok {
		t.Error("an encoded object was decoded directly")
	}
}
