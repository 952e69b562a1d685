package scheduling

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// PodRequests returns the resources the kube-scheduler reserves for a pod:
// the container aggregate (containerAggregate), with the pod-level
// requests of spec.resources in place of it for the resources they set
// (applyPodLevel), plus the pod overhead. This is the rule of
// k8s.io/component-helpers/resource PodRequests, which the kube-scheduler
// and Karpenter (pkg/utils/resources Ceiling) call; it is written here
// because that module is not in nodewright's module graph, and because
// nodewright also reads pods the API server never defaulted (simulate's
// manifests), so a limit without a request counts at the limit.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	out := containerAggregate(pod)
	applyPodLevel(out, pod.Spec.Resources)
	addList(out, pod.Spec.Overhead)
	return out
}

// containerAggregate is the larger of (regular containers + restartable
// init containers, i.e. sidecars) and the peak during init (each
// non-restartable init container plus the sidecars started before it). A
// container that sets a limit but no request is counted at its limit, as
// the API server's defaulting would (SetDefaults_Pod).
func containerAggregate(pod *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	sidecars := corev1.ResourceList{}
	initPeak := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := containerRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addList(sidecars, req)
			maxList(initPeak, sidecars)
			continue
		}
		peak := req.DeepCopy()
		addList(peak, sidecars)
		maxList(initPeak, peak)
	}
	for i := range pod.Spec.Containers {
		addList(out, containerRequests(&pod.Spec.Containers[i]))
	}
	addList(out, sidecars)
	maxList(out, initPeak)
	return out
}

// applyPodLevel puts the pod-level requests (PodLevelResources, beta and
// on by default since Kubernetes 1.34) in place of the container aggregate
// in out, for the resources pod-level resources support: cpu, memory and
// hugepages-* (component-helpers IsSupportedPodLevelResource; others are
// ignored, as validation refuses them). A pod-level limit without a
// pod-level request defaults the request as the API server does
// (k8s.io/kubernetes pkg/api/pod DefaultPodLevelResources, or
// pkg/apis/core/v1 defaultPodRequests before PodLevelResourcesFixDefaulting):
// to the container aggregate for cpu and memory when the containers ask
// for it (which leaves out unchanged), to the limit otherwise.
func applyPodLevel(out corev1.ResourceList, r *corev1.ResourceRequirements) {
	if r == nil {
		return
	}
	for name, q := range r.Requests {
		if podLevelResource(name) {
			out[name] = q
		}
	}
	for name, q := range r.Limits {
		if _, set := r.Requests[name]; set || !podLevelResource(name) {
			continue
		}
		if _, asked := out[name]; asked && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			continue
		}
		out[name] = q
	}
}

// podLevelResource is component-helpers' IsSupportedPodLevelResource.
func podLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// RequestCache holds pods' requests (PodRequests), each computed once: a
// disruption pass reads every pod's requests several times (its node's
// digest, the screen, new-node prices, each simulation moving it). Pods
// are known by UID, so a pod and its Unbound copy share an entry; one
// without a UID is computed each time. A cache serves one view of the
// cluster (a pass): a pod's requests do not change within it. The lists
// it returns are shared, never to be modified. The zero value is empty;
// a nil cache computes each time. Safe for concurrent use.
type RequestCache struct {
	mu    sync.Mutex
	byUID map[types.UID]corev1.ResourceList
}

// Of is PodRequests(p), computed once per pod.
func (c *RequestCache) Of(p *corev1.Pod) corev1.ResourceList {
	if c == nil || p.UID == "" {
		return PodRequests(p)
	}
	c.mu.Lock()
	r, ok := c.byUID[p.UID]
	c.mu.Unlock()
	if ok {
		return r
	}
	r = PodRequests(p)
	c.mu.Lock()
	if c.byUID == nil {
		c.byUID = map[types.UID]corev1.ResourceList{}
	}
	c.byUID[p.UID] = r
	c.mu.Unlock()
	return r
}

func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range c.Resources.Limits {
		out[name] = q
	}
	for name, q := range c.Resources.Requests {
		out[name] = q
	}
	return out
}

func addList(dst, src corev1.ResourceList) {
	for name, q := range src {
		cur := dst[name]
		cur.Add(q)
		dst[name] = cur
	}
}

func maxList(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q
		}
	}
}

// resourceSpace maps resource names to dense vector indices for one solve.
// cpu is kept in millicores, everything else in base units (bytes, count).
type resourceSpace struct {
	names []corev1.ResourceName
	index map[corev1.ResourceName]int
}

const (
	resCPU = iota
	resMemory
	resPods
	resEphemeral
)

func newResourceSpace() *resourceSpace {
	s := &resourceSpace{index: map[corev1.ResourceName]int{}}
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		s.add(n)
	}
	return s
}

func (s *resourceSpace) add(n corev1.ResourceName) {
	if _, ok := s.index[n]; ok {
		return
	}
	s.index[n] = len(s.names)
	s.names = append(s.names, n)
}

func (s *resourceSpace) dim() int { return len(s.names) }

// vector converts a list, registering unseen names only when register is
// true (pending pods' and DaemonSets' requests); other lists (allocatable,
// existing pods) drop the names no pending pod or DaemonSet asks for: they
// cannot matter to placement.
func (s *resourceSpace) vector(l corev1.ResourceList, register bool) resVec {
	if register {
		for n := range l {
			s.add(n)
		}
	}
	v := make(resVec, s.dim())
	for n, q := range l {
		if i, ok := s.index[n]; ok {
			v[i] = quantityValue(n, q)
		}
	}
	return v
}

func quantityValue(n corev1.ResourceName, q resource.Quantity) int64 {
	if n == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func (s *resourceSpace) list(v resVec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i, n := range s.names {
		if i >= len(v) {
			break
		}
		if n == corev1.ResourceCPU {
			out[n] = *resource.NewMilliQuantity(v[i], resource.DecimalSI)
		} else if n == corev1.ResourceMemory || n == corev1.ResourceEphemeralStorage || strings.HasPrefix(string(n), "hugepages-") {
			out[n] = *resource.NewQuantity(v[i], resource.BinarySI)
		} else {
			out[n] = *resource.NewQuantity(v[i], resource.DecimalSI)
		}
	}
	return out
}

func (s *resourceSpace) describe(v resVec) string {
	var parts []string
	for i, n := range s.names {
		if i >= len(v) || v[i] == 0 || n == corev1.ResourcePods {
			continue
		}
		var str string
		switch n {
		case corev1.ResourceCPU:
			str = resource.NewMilliQuantity(v[i], resource.DecimalSI).String()
		case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			str = resource.NewQuantity(v[i], resource.BinarySI).String()
		default:
			str = fmt.Sprint(v[i])
		}
		parts = append(parts, string(n)+"="+str)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// resVec is a dense resource vector in a resourceSpace.
type resVec []int64

func (v resVec) fits(used, capacity resVec) bool {
	for i, x := range v {
		if x != 0 && used[i]+x > capacity[i] {
			return false
		}
	}
	return true
}

// fitCount is how many copies of v fit into capacity-used (max limit).
func (v resVec) fitCount(used, capacity resVec, limit int) int {
	n := limit
	for i, x := range v {
		if x <= 0 {
			continue
		}
		free := capacity[i] - used[i]
		if free < x {
			return 0
		}
		if k := free / x; k < int64(n) {
			n = int(k)
		}
	}
	return n
}

func (v resVec) addScaled(o resVec, k int64) {
	for i := range o {
		v[i] += o[i] * k
	}
}

func (v resVec) clone() resVec { return append(resVec(nil), v...) }

// firstExceeded names the first resource of need that capacity cannot hold.
func (s *resourceSpace) firstExceeded(need, capacity resVec) string {
	for i := range need {
		if need[i] > capacity[i] {
			return string(s.names[i])
		}
	}
	return ""
}

// vecLE reports whether a <= b in every dimension.
func vecLE(a, b resVec) bool {
	for i, x := range a {
		if x > b[i] {
			return false
		}
	}
	return true
}
