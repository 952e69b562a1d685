package kube

import (
	"context"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Event types, as kubectl prints them.
const (
	EventNormal  = corev1.EventTypeNormal
	EventWarning = corev1.EventTypeWarning
)

const maxEventMessage = 1024

// PodRef is the involvedObject of an event about a pod.
func PodRef(p *corev1.Pod) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// NodeRef is the involvedObject of an event about a node. kubectl describe
// node finds events whose involvedObject.uid is the node's UID or its name
// (the kubelet's convention); the UID is used when known.
func NodeRef(n *corev1.Node) corev1.ObjectReference {
	uid := n.UID
	if uid == "" {
		uid = types.UID(n.Name)
	}
	return corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: uid}
}

// Event records a core/v1 Event with source component "nodewright", the
// way kubectl describe lists them (Type, Reason, Age, From, Message).
// Repeats of the same (object, type, reason, message) are aggregated into one
// Event with a rising count, as the kubelet's recorder does, instead of
// piling up objects. Events are advisory: callers usually log the error and
// carry on.
func (c *Client) Event(ctx context.Context, ref corev1.ObjectReference, eventType, reason, message string) error {
	if ref.Name == "" || ref.Kind == "" {
		return fmt.Errorf("event %s: involved object needs kind and name, got %+v", reason, ref)
	}
	if eventType != EventNormal && eventType != EventWarning {
		return fmt.Errorf("event %s on %s %s: type %q is neither Normal nor Warning", reason, ref.Kind, ref.Name, eventType)
	}
	if len(message) > maxEventMessage {
		message = message[:maxEventMessage-3] + "..."
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // cluster-scoped objects' events live here
	}
	now := metav1.NewTime(c.now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: eventName(ref, eventType, reason, message), Namespace: ns},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        message,
		Type:           eventType,
		Source:         corev1.EventSource{Component: Component},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	events := c.cs.CoreV1().Events(ns)
	_, err := events.Create(ctx, ev, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		// A missing namespace answers NotFound.
		return apiError(err, "event %s on %s %s", reason, ref.Kind, ref.Name)
	}
	for attempt := 0; attempt < 3; attempt++ {
		cur, err := events.Get(ctx, ev.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) { // expired (event TTL) between create and get
			if _, err = events.Create(ctx, ev, metav1.CreateOptions{}); err == nil {
				return nil
			}
		}
		if err != nil {
			return apiError(err, "event %s on %s %s", reason, ref.Kind, ref.Name)
		}
		cur.Count++
		cur.LastTimestamp = now
		_, err = events.Update(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return apiError(err, "event %s on %s %s", reason, ref.Kind, ref.Name)
		}
	}
	return fmt.Errorf("event %s on %s %s: kept conflicting with concurrent updates", reason, ref.Kind, ref.Name)
}

// PodEvent records an event on a pod (see Event).
func (c *Client) PodEvent(ctx context.Context, p *corev1.Pod, eventType, reason, format string, args ...any) error {
	return c.Event(ctx, PodRef(p), eventType, reason, fmt.Sprintf(format, args...))
}

// NodeEvent records an event on a node (see Event).
func (c *Client) NodeEvent(ctx context.Context, n *corev1.Node, eventType, reason, format string, args ...any) error {
	return c.Event(ctx, NodeRef(n), eventType, reason, fmt.Sprintf(format, args...))
}

// eventName is deterministic per (object, type, reason, message) so repeats
// aggregate; kept within the 253-character name limit.
func eventName(ref corev1.ObjectReference, eventType, reason, message string) string {
	h := fnv.New64a()
	for _, s := range []string{ref.Kind, ref.Namespace, ref.Name, string(ref.UID), eventType, reason, message} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	name := ref.Name
	if len(name) > 230 {
		name = name[:230]
	}
	return fmt.Sprintf("%s.%016x", name, h.Sum64())
}
