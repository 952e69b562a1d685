// Package admission turns the kube-apiserver's AdmissionReview calls into
// provisioning hints. It never denies and never blocks: a pod operation is
// always allowed, and the provisioner re-reads the truth from the API server.
package admission

import (
	"encoding/json"
	"errors"
	"fmt"
)

// review is the subset of admission.k8s.io/v1 AdmissionReview the webhook
// reads. Decoding into a narrow struct instead of corev1.Pod keeps the hot
// path allocation-light: the handler must answer in milliseconds.
type review struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Request    *reviewRequest  `json:"request"`
	Response   *reviewResponse `json:"response,omitempty"`
}

type reviewRequest struct {
	UID         string `json:"uid"`
	Kind        gvk    `json:"kind"`
	Resource    gvr    `json:"resource"`
	SubResource string `json:"subResource"`
	Operation   string `json:"operation"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	DryRun      *bool  `json:"dryRun"`
	Object      *pod   `json:"object"`
}

type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

type gvr struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

type pod struct {
	Metadata struct {
		Name            string `json:"name"`
		GenerateName    string `json:"generateName"`
		Namespace       string `json:"namespace"`
		OwnerReferences []struct {
			Kind       string `json:"kind"`
			Controller *bool  `json:"controller"`
		} `json:"ownerReferences"`
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		NodeName          string `json:"nodeName"`
		SchedulerName     string `json:"schedulerName"`
		PriorityClassName string `json:"priorityClassName"`
	} `json:"spec"`
	Status struct {
		Phase             string `json:"phase"`
		NominatedNodeName string `json:"nominatedNodeName"`
		Conditions        []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"conditions"`
	} `json:"status"`
}

type reviewResponse struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
}

var errNoRequest = errors.New("admission review has no request")

func decodeReview(body []byte) (*review, error) {
	var r review
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode admission review: %w", err)
	}
	if r.Request == nil {
		return nil, errNoRequest
	}
	if r.Request.UID == "" {
		return nil, errors.New("admission review request has no uid")
	}
	if r.APIVersion != "admission.k8s.io/v1" || r.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("unsupported admission review %s %s (want admission.k8s.io/v1 AdmissionReview)", r.APIVersion, r.Kind)
	}
	return &r, nil
}

// allowed is the only answer the webhook ever gives.
func allowed(uid string) []byte {
	out, _ := json.Marshal(review{
		APIVersion: "admission.k8s.io/v1",
		Kind:       "AdmissionReview",
		Response:   &reviewResponse{UID: uid, Allowed: true},
	})
	return out
}

// Hint says why a pod may need capacity. It is only ever a hint.
type Hint struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Reason is "Unschedulable" for the scheduler's verdict or "Created" for
	// the fallback on clusters without matchConditions.
	Reason string `json:"reason"`
}

// hintFor decides whether a request says "this pod needs capacity". The
// webhook configuration's matchConditions already filter most calls; this is
// the same test in code so clusters without matchConditions behave alike.
func hintFor(req *reviewRequest) (Hint, bool) {
	if req.Resource.Resource != "pods" || req.Object == nil {
		return Hint{}, false
	}
	p := req.Object
	if p.Spec.NodeName != "" || p.Metadata.DeletionTimestamp != nil || ownedByDaemonSetOrNode(p) {
		return Hint{}, false
	}
	if req.DryRun != nil && *req.DryRun {
		return Hint{}, false
	}
	name := req.Name
	if name == "" {
		name = p.Metadata.Name
	}
	ns := req.Namespace
	if ns == "" {
		ns = p.Metadata.Namespace
	}
	switch {
	case req.Operation == "UPDATE" && req.SubResource == "status":
		for _, c := range p.Status.Conditions {
			if c.Type == "PodScheduled" && c.Status == "False" && c.Reason == "Unschedulable" {
				return Hint{Namespace: ns, Name: name, Reason: "Unschedulable"}, true
			}
		}
		return Hint{}, false
	case req.Operation == "CREATE" && req.SubResource == "":
		return Hint{Namespace: ns, Name: name, Reason: "Created"}, true
	}
	return Hint{}, false
}

func ownedByDaemonSetOrNode(p *pod) bool {
	for _, o := range p.Metadata.OwnerReferences {
		if o.Controller != nil && *o.Controller && (o.Kind == "DaemonSet" || o.Kind == "Node") {
			return true
		}
	}
	return false
}
