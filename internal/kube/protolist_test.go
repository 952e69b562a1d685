package kube

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// encodedPodList is a protobuf PodList of n pods as the API server writes
// it.
func encodedPodList(tb testing.TB, n int, cont string) []byte {
	tb.Helper()
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: cont}}
	for i := range n {
		p := synthPod("ns", fmt.Sprintf("p%d", i), "n1", false)
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(fmt.Sprintf("%dm", 100+i))
		if i%2 == 1 { // every field strip drops, and what it keeps beside them
			full := p.Spec.Containers[0]
			full.WorkingDir, full.TerminationMessagePath, full.Args = "/srv", "/dev/log", []string{"-v"}
			full.StartupProbe, full.Lifecycle = full.LivenessProbe, &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}}
			full.EnvFrom = []corev1.EnvFromSource{{Prefix: "X_"}}
			p.Spec.InitContainers = []corev1.Container{full}
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
			p.Status.InitContainerStatuses = p.Status.ContainerStatuses
			p.Status.EphemeralContainerStatuses = p.Status.ContainerStatuses
			p.Annotations = map[string]string{"keep": "me", corev1.LastAppliedConfigAnnotation: "{}"}
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Mi")}
			p.Spec.Volumes = []corev1.Volume{
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
				{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
					Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: new("gp3")}}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			}
		}
		list.Items = append(list.Items, *p)
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// decodeBoth decodes b with decodeListStream, pruned and not, and with
// client-go's decoder (then stripPod): when the unpruned stream decoder
// accepts b, client-go and the pruned decoder must too, with the same
// pods and continue token. The pruned one may accept more: it does not
// read what strip drops, garbled or not.
func decodeBoth(t *testing.T, b []byte) (pods []*corev1.Pod, ok bool, err error) {
	t.Helper()
	pods, cont, ok, err := decodeListStream[corev1.Pod](bufio.NewReader(bytes.NewReader(b)), "PodList", podPrune, stripPod)
	whole, wholeCont, wholeOK, wholeErr := decodeListStream[corev1.Pod](bufio.NewReader(bytes.NewReader(b)), "PodList", nil, stripPod)
	if ok != wholeOK || (err != nil && wholeErr == nil) {
		t.Fatalf("pruned decoding: %v %v; whole: %v %v", ok, err, wholeOK, wholeErr)
	}
	if !wholeOK || wholeErr != nil {
		return pods, ok, err
	}
	want := &corev1.PodList{}
	if _, _, cerr := scheme.Codecs.UniversalDeserializer().Decode(b, nil, want); cerr != nil {
		t.Fatalf("stream decoded what client-go refuses (%v)", cerr)
	}
	wantPods, wantCont := pageOf(want, podItems, stripPod)
	for _, got := range []struct {
		pods []*corev1.Pod
		cont string
	}{{pods, cont}, {whole, wholeCont}} {
		if got.cont != wantCont || len(got.pods) != len(wantPods) {
			t.Fatalf("stream decoded %d pods, continue %q; client-go %d, %q", len(got.pods), got.cont, len(wantPods), wantCont)
		}
		for i := range got.pods {
			if !equality.Semantic.DeepEqual(got.pods[i], wantPods[i]) {
				t.Fatalf("pod %d differs:\n got  %+v\n want %+v", i, got.pods[i], wantPods[i])
			}
		}
	}
	return pods, ok, err
}

// The stream decoder gives what client-go's decoder and then strip give,
// pod for pod; leaves anything but protobuf to client-go; and refuses a
// truncated, encoded or foreign response with an error.
func TestDecodeListStreamMatchesClientGo(t *testing.T) {
	full := encodedPodList(t, 50, "next")
	pods, ok, err := decodeBoth(t, full)
	if !ok || err != nil || len(pods) != 50 {
		t.Fatalf("decoded %d pods: %v %v", len(pods), ok, err)
	}
	if c := pods[3].Spec.Containers[0]; len(c.Env) != 0 || c.Resources.Requests.Cpu().MilliValue() != 103 {
		t.Errorf("pod 3 not stripped as strip says: %+v", c)
	}
	if c := pods[3].Spec.InitContainers[0]; c.Args != nil || c.Lifecycle != nil || c.Resources.Requests.Cpu().MilliValue() != 103 ||
		pods[3].Annotations["keep"] != "me" || pods[3].Spec.Overhead.Memory().Value() != 1<<20 {
		t.Errorf("pod 3 not pruned as strip says: %+v", pods[3])
	}
	vols := pods[3].Spec.Volumes
	if len(vols) != 5 || vols[0].Projected != nil || vols[1].ConfigMap != nil || vols[4].EmptyDir != nil ||
		vols[2].PersistentVolumeClaim == nil || vols[2].PersistentVolumeClaim.ClaimName != "data-0" ||
		vols[3].Ephemeral == nil || *vols[3].Ephemeral.VolumeClaimTemplate.Spec.StorageClassName != "gp3" {
		t.Errorf("pod 3's volumes: want each named, with only its claim: %+v", vols)
	}
	if pods, ok, err := decodeBoth(t, encodedPodList(t, 0, "")); !ok || err != nil || len(pods) != 0 {
		t.Errorf("empty list: %d pods, %v %v", len(pods), ok, err)
	}

	js := []byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`)
	r := bufio.NewReader(bytes.NewReader(js))
	if _, _, ok, err := decodeListStream[corev1.Pod](r, "PodList", nil, nil); ok || err != nil {
		t.Errorf("json: decoded directly (%v, %v); client-go should", ok, err)
	}
	if rest, _ := io.ReadAll(r); !bytes.Equal(rest, js) {
		t.Errorf("json: the stream decoder consumed %q", js[:len(js)-len(rest)])
	}

	raw := full[len(protobufMagic):]
	var unk runtime.Unknown
	if err := unk.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*runtime.Unknown){
		"encoded":    func(u *runtime.Unknown) { u.ContentEncoding = "gzip" },
		"other kind": func(u *runtime.Unknown) { u.Kind = "NodeList" },
		"no kind":    func(u *runtime.Unknown) { u.Kind = "" },
	} {
		u := unk
		mod(&u)
		b, err := u.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := decodeBoth(t, append(append([]byte(nil), protobufMagic...), b...)); !ok || err == nil {
			t.Errorf("%s: decoded without an error (%v)", name, ok)
		}
	}
}

// Nodes are pruned (nodePrune) as stripNode strips them.
func TestDecodeNodeListMatchesClientGo(t *testing.T) {
	list := &corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}}
	for i := range 3 {
		n := synthNode(fmt.Sprintf("n%d", i))
		n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
		list.Items = append(list.Items, *n)
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &buf); err != nil {
		t.Fatal(err)
	}
	got, _, ok, err := decodeListStream[corev1.Node](bufio.NewReader(bytes.NewReader(buf.Bytes())), "NodeList", nodePrune, stripNode)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	want := &corev1.NodeList{}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(buf.Bytes(), nil, want); err != nil {
		t.Fatal(err)
	}
	wantNodes, _ := pageOf(want, nodeItems, stripNode)
	if !equality.Semantic.DeepEqual(got, wantNodes) || got[0].Status.Allocatable.Cpu().MilliValue() != 3920 {
		t.Errorf("nodes differ:\n got  %+v\n want %+v", got[0], wantNodes[0])
	}
}

// A response cut anywhere inside the list, or garbled, is an error, never
// a panic or a shorter list.
func TestDecodeListStreamTruncatedOrGarbled(t *testing.T) {
	full := encodedPodList(t, 3, "")
	var unk runtime.Unknown
	if err := unk.Unmarshal(full[len(protobufMagic):]); err != nil {
		t.Fatal(err)
	}
	// The raw list ends before the (empty) content encoding and type.
	listEnd := len(full) - 4
	for cut := len(protobufMagic); cut < len(full); cut++ {
		_, _, err := decodeBoth(t, full[:cut])
		if cut < listEnd && err == nil {
			t.Fatalf("cut at %d of %d: no error", cut, len(full))
		}
	}
	for i := len(protobufMagic); i < len(full); i += 7 {
		b := bytes.Clone(full)
		b[i] ^= 0xa5
		_, _, _ = decodeBoth(t, b) // no panic; accepted only as client-go accepts it
	}
}

func FuzzDecodeListStream(f *testing.F) {
	f.Add(encodedPodList(f, 2, "next"))
	f.Add(encodedPodList(f, 0, ""))
	f.Add(append(bytes.Clone(protobufMagic), 0x12, 0x80, 0x80, 0x80, 0x80, 0x10))
	f.Fuzz(func(t *testing.T, b []byte) { _, _, _ = decodeBoth(t, b) })
}

// Through the real client: a list served in pages, or gzipped whole with
// or without the transport's asking (a response the transport did not
// ask to be gzipped reaches the decoder compressed), lists every pod.
func TestPodListThroughTheClient(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		whole, gzip, askGzip bool
	}{
		{name: "paged"},
		{name: "whole gzipped", whole: true, gzip: true},
		{name: "whole gzipped unasked", whole: true, gzip: true, askGzip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := newListServer(t, 30, 7, 0)
			ls.wholeLists, ls.gzip = tc.whole, tc.gzip
			cfg := ls.restConfig()
			if tc.askGzip {
				cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return acceptGzip{rt} }
			}
			c, err := NewClient(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := c.Snapshot(context.Background(), SnapshotOptions{Parts: PartBoundPods, PageSize: 20})
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, ps := range snap.PodsByNode {
				total += len(ps)
			}
			want := 11
			if tc.whole {
				want = 1
			}
			if total != 210 || ls.count("/api/v1/pods") != want {
				t.Fatalf("%d pods in %d requests, want 210 in %d", total, ls.count("/api/v1/pods"), want)
			}
		})
	}
}

// acceptGzip asks for gzip itself, so Go's transport leaves the response
// compressed.
type acceptGzip struct{ rt http.RoundTripper }

func (a acceptGzip) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Accept-Encoding", "gzip")
	return a.rt.RoundTrip(r)
}
