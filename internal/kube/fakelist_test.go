package kube

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// listServer speaks just enough of the Kubernetes list API (limit/continue,
// the two pod field selectors the snapshot uses) to serve synthetic clusters
// for the snapshot benchmark and unit tests. Pages are encoded once and
// cached, so a benchmark measures the client, not the server.
type listServer struct {
	*httptest.Server
	pending, bound []corev1.Pod
	nodes          []corev1.Node
	pageMu         sync.Mutex
	pages          map[string][]byte
	requests       sync.Map // path -> *int
	// expireContinue, when > 0, answers that many continued list requests
	// with 410 Gone (an expired continue token).
	expireContinue int
	// versions records, per request, its resourceVersion and whether it
	// continued a list ("0", "0+continue", "+continue").
	versions []string
	// wholeLists answers every list in one response, whatever its limit,
	// as the watch cache does (resourceVersion=0).
	wholeLists bool
	// gzip compresses responses for clients that accept it, as the API
	// server does for large ones.
	gzip bool
}

func newListServer(tb testing.TB, nodes, podsPerNode, pending int) *listServer {
	tb.Helper()
	ls := &listServer{pages: map[string][]byte{}}
	for i := range nodes {
		name := fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i/65536, (i/256)%256, i%256)
		ls.nodes = append(ls.nodes, *synthNode(name))
		for j := range podsPerNode {
			ls.bound = append(ls.bound, *synthPod(fmt.Sprintf("ns-%d", (i*podsPerNode+j)%50), fmt.Sprintf("app-%d-%d", i, j), name, true))
		}
	}
	for k := range pending {
		ls.pending = append(ls.pending, *synthPod(fmt.Sprintf("ns-%d", k%50), fmt.Sprintf("pending-%d", k), "", k%2 == 0))
	}
	ls.Server = httptest.NewServer(http.HandlerFunc(ls.serve))
	tb.Cleanup(ls.Close)
	return ls
}

// restConfig asks for protobuf with JSON fallback, as RESTConfig does for EKS.
func (ls *listServer) restConfig() *rest.Config {
	cfg := &rest.Config{Host: ls.URL, QPS: DefaultQPS, Burst: DefaultBurst}
	preferProtobuf(cfg)
	return cfg
}

func (ls *listServer) count(path string) int {
	v, ok := ls.requests.Load(path)
	if !ok {
		return 0
	}
	return *v.(*int)
}

func page[T any](items []T, q url.Values) ([]T, string) {
	limit, _ := strconv.Atoi(q.Get("limit"))
	start, _ := strconv.Atoi(q.Get("continue"))
	end := len(items)
	if limit > 0 && start+limit < end {
		end = start + limit
	}
	cont := ""
	if end < len(items) {
		cont = strconv.Itoa(end)
	}
	return items[start:end], cont
}

// emptyList is a list kind the snapshot reads that listServer serves without
// items.
type emptyList interface {
	runtime.Object
	SetResourceVersion(string)
}

// emptyLists are listServer's empty lists, by path.
func emptyLists() map[string]emptyList {
	return map[string]emptyList{
		"/api/v1/persistentvolumes":                 &corev1.PersistentVolumeList{},
		"/api/v1/persistentvolumeclaims":            &corev1.PersistentVolumeClaimList{},
		"/apis/policy/v1/poddisruptionbudgets":      &policyv1.PodDisruptionBudgetList{},
		"/apis/apps/v1/daemonsets":                  &appsv1.DaemonSetList{},
		"/apis/storage.k8s.io/v1/storageclasses":    &storagev1.StorageClassList{},
		"/apis/storage.k8s.io/v1/csinodes":          &storagev1.CSINodeList{},
		"/apis/storage.k8s.io/v1/volumeattachments": &storagev1.VolumeAttachmentList{},
	}
}

func (ls *listServer) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if ls.wholeLists {
		q.Del("limit")
	}
	ls.pageMu.Lock()
	expire := q.Get("continue") != "" && ls.expireContinue > 0
	v := q.Get("resourceVersion")
	if q.Get("continue") != "" {
		v += "+continue"
	}
	ls.versions = append(ls.versions, v)
	if expire {
		ls.expireContinue--
	}
	ls.pageMu.Unlock()
	if expire {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"The provided continue parameter is too old"}`))
		return
	}
	lm := metav1.ListMeta{ResourceVersion: "1000"}
	var obj runtime.Object
	switch r.URL.Path {
	case "/api/v1/pods":
		var src []corev1.Pod
		switch fs := q.Get("fieldSelector"); fs {
		case pendingPodSelector:
			src = ls.pending
		case boundPodSelector:
			src = ls.bound
		default:
			http.Error(w, "unexpected field selector "+fs, http.StatusBadRequest)
			return
		}
		items, cont := page(src, q)
		lm.Continue = cont
		obj = &corev1.PodList{ListMeta: lm, Items: items}
	case "/api/v1/nodes":
		items, cont := page(ls.nodes, q)
		lm.Continue = cont
		obj = &corev1.NodeList{ListMeta: lm, Items: items}
	case "/api/v1/namespaces":
		obj = &corev1.NamespaceList{ListMeta: lm, Items: []corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: "ns-0", Labels: map[string]string{"team": "a", corev1.LabelMetadataName: "ns-0"}}},
		}}
	default:
		empty, ok := emptyLists()[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		empty.SetResourceVersion(lm.ResourceVersion)
		obj = empty
	}
	mediaType := runtime.ContentTypeJSON
	if strings.Contains(r.Header.Get("Accept"), runtime.ContentTypeProtobuf) {
		mediaType = runtime.ContentTypeProtobuf
	}
	ls.pageMu.Lock()
	c, _ := ls.requests.LoadOrStore(r.URL.Path, new(int))
	*c.(*int)++
	key := mediaType + "|" + r.URL.Path + "?" + r.URL.RawQuery
	body, ok := ls.pages[key]
	ls.pageMu.Unlock()
	if !ok {
		info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
		gv := obj.GetObjectKind().GroupVersionKind().GroupVersion()
		if gvks, _, err := scheme.Scheme.ObjectKinds(obj); err == nil {
			gv = gvks[0].GroupVersion()
		}
		var err error
		body, err = runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, gv), obj)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		ls.pageMu.Lock()
		ls.pages[key] = body
		ls.pageMu.Unlock()
	}
	w.Header().Set("Content-Type", mediaType)
	if ls.gzip && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		body = ls.gzipped(key, body)
		w.Header().Set("Content-Encoding", "gzip")
	}
	_, _ = w.Write(body)
}

// gzipped is body compressed, cached under key.
func (ls *listServer) gzipped(key string, body []byte) []byte {
	ls.pageMu.Lock()
	defer ls.pageMu.Unlock()
	if z, ok := ls.pages["gzip|"+key]; ok {
		return z
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(body)
	_ = zw.Close()
	ls.pages["gzip|"+key] = buf.Bytes()
	return buf.Bytes()
}

// synthPod is shaped like a typical Deployment pod as the API server returns
// it: managedFields, last-applied annotation, env, probes, statuses.
func synthPod(ns, name, node string, unschedulable bool) *corev1.Pod {
	created := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	fields := metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0c9c\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`)
	var env []corev1.EnvVar
	for i := range 12 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%02d", i), Value: "some-configuration-value-that-is-not-tiny"})
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}, PeriodSeconds: 10}
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + ns + "-" + name), ResourceVersion: "123",
			CreationTimestamp: created, GenerateName: "app-7d9f8c-",
			Labels:          map[string]string{"app": "web", "pod-template-hash": "7d9f8c"},
			Annotations:     map[string]string{corev1.LastAppliedConfigAnnotation: fields.GetRawString()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "app-7d9f8c", UID: "0c9c"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: "Update", APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: fields}},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "public.ecr.aws/nginx/nginx:1.27", Env: env,
				Command:        []string{"/docker-entrypoint.sh", "nginx", "-g", "daemon off;"},
				LivenessProbe:  probe,
				ReadinessProbe: probe,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi"),
				}},
			}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
	}
	if node != "" {
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		}, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "public.ecr.aws/nginx/nginx:1.27", ImageID: "sha256:0123456789abcdef", ContainerID: "containerd://abcdef"}}}
		return p
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	if unschedulable {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/5000 nodes are available: 5000 Insufficient cpu."}}
	}
	return p
}

func synthNode(name string) *corev1.Node {
	var images []corev1.ContainerImage
	for i := range 30 {
		images = append(images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.example/team/image-%d@sha256:%064d", i, i)}, SizeBytes: 123456789})
	}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3920m"), corev1.ResourceMemory: resource.MustParse("14Gi"), corev1.ResourcePods: resource.MustParse("58")}
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{
			"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.xlarge", "topology.kubernetes.io/zone": "us-west-2a",
			"karpenter.sh/capacity-type": "spot", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
		}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-0123456789abcdef0"},
		Status: corev1.NodeStatus{
			Capacity: alloc, Allocatable: alloc, Images: images,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}
