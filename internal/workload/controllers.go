package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// replicated expands a Deployment, ReplicaSet or StatefulSet into
// <name>-<i> pods, i from 0.
func (p *parser) replicated(kind string, m *metav1.ObjectMeta, replicas *int32, sel *metav1.LabelSelector,
	tmpl *corev1.PodTemplateSpec, line int, claims []corev1.PersistentVolumeClaim) error {
	if err := p.unique(kind, m, line); err != nil {
		return err
	}
	what := fmt.Sprintf("%s: %s %s/%s", p.where(line), kind, ns(m), m.Name)
	n := int32(1)
	if replicas != nil {
		n = *replicas
	}
	if n < 0 || n > MaxReplicas {
		return fmt.Errorf("%s: spec.replicas %d is out of range [0, %d]", what, n, MaxReplicas)
	}
	if err := p.room(what, int(n)*(1+len(claims))); err != nil {
		return err
	}
	if err := checkTemplate(sel, tmpl); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	extra := map[string]string{}
	if kind == "Deployment" {
		// Real pods carry pod-template-hash; topology spread matchLabelKeys
		// commonly names it.
		extra[appsv1.DefaultDeploymentUniqueLabelKey] = templateHash(tmpl)
	}
	for i := int32(0); i < n; i++ {
		pod := p.fromTemplate(kind, m, tmpl, fmt.Sprintf("%s-%d", m.Name, i), extra)
		if kind == "StatefulSet" {
			pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
			pod.Labels[appsv1.PodIndexLabel] = fmt.Sprint(i)
			pod.Spec.Hostname = pod.Name
			for _, c := range claims {
				pvc := c.DeepCopy()
				pvc.Name = fmt.Sprintf("%s-%s", c.Name, pod.Name)
				pvc.Namespace = pod.Namespace
				pvc.Labels = mergeLabels(pvc.Labels, tmpl.Labels)
				p.w.PersistentVolumeClaims = append(p.w.PersistentVolumeClaims, pvc)
				setClaimVolume(pod, c.Name, pvc.Name)
			}
		}
		p.w.Pods = append(p.w.Pods, pod)
	}
	return nil
}

// setClaimVolume points the pod's volume called name at claim, adding the
// volume when the template does not declare it (as the StatefulSet controller does).
func setClaimVolume(pod *corev1.Pod, name, claim string) {
	src := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			pod.Spec.Volumes[i].VolumeSource = src
			return
		}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: src})
}

func (p *parser) job(j *batchv1.Job, line int) error {
	if err := p.unique("Job", &j.ObjectMeta, line); err != nil {
		return err
	}
	what := fmt.Sprintf("%s: Job %s/%s", p.where(line), ns(&j.ObjectMeta), j.Name)
	n := int32(1)
	if j.Spec.Parallelism != nil {
		n = *j.Spec.Parallelism
	}
	if n < 0 || n > MaxReplicas {
		return fmt.Errorf("%s: spec.parallelism %d is out of range [0, %d]", what, n, MaxReplicas)
	}
	if err := p.room(what, int(n)); err != nil {
		return err
	}
	if c := j.Spec.Completions; c != nil {
		if *c < 0 {
			return fmt.Errorf("%s: spec.completions %d is negative", what, *c)
		}
		// No more pods run at once than there are completions left.
		n = min(n, *c)
	}
	if j.Spec.Suspend != nil && *j.Spec.Suspend {
		p.warn(line, "Job %s/%s is suspended and runs no pods", ns(&j.ObjectMeta), j.Name)
		return nil
	}
	// The Job controller generates the selector; a manual one must match.
	if j.Spec.Selector != nil {
		if err := checkTemplate(j.Spec.Selector, &j.Spec.Template); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	} else if err := checkPodSpec(&j.Spec.Template.Spec); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	extra := map[string]string{batchv1.JobNameLabel: j.Name, "job-name": j.Name}
	for i := int32(0); i < n; i++ {
		pod := p.fromTemplate("Job", &j.ObjectMeta, &j.Spec.Template, fmt.Sprintf("%s-%d", j.Name, i), extra)
		if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion {
			pod.Labels[batchv1.JobCompletionIndexAnnotation] = fmt.Sprint(i)
		}
		p.w.Pods = append(p.w.Pods, pod)
	}
	return nil
}

func checkTemplate(sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) error {
	if err := checkPodSpec(&tmpl.Spec); err != nil {
		return err
	}
	if sel == nil {
		return errors.New("spec.selector is required")
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return fmt.Errorf("spec.selector: %w", err)
	}
	if s.Empty() {
		return errors.New("spec.selector is empty")
	}
	if !s.Matches(labelsSet(tmpl.Labels)) {
		return fmt.Errorf("spec.selector %s does not match the template labels %v", s.String(), tmpl.Labels)
	}
	return nil
}

type labelsSet map[string]string

func (l labelsSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelsSet) Get(k string) string            { return l[k] }
func (l labelsSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

func (p *parser) fromTemplate(kind string, owner *metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec, name string, extra map[string]string) *corev1.Pod {
	t := true
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   ns(owner),
			Labels:      mergeLabels(tmpl.Labels, extra),
			Annotations: mergeLabels(tmpl.Annotations, nil),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: ownerAPIVersion[kind], Kind: kind, Name: owner.Name, UID: owner.UID, Controller: &t,
			}},
		},
		Spec:   *tmpl.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	p.stamp(pod)
	return pod
}

var ownerAPIVersion = map[string]string{
	"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1",
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// templateHash is a short stable hash of a pod template, like pod-template-hash.
func templateHash(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}
