package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/cfn"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/settings"
)

// accessResourceType is the custom resource that gives the controllers
// their Kubernetes rights: the stack maps the controller role's access
// entry to access.ControllerGroup (access.ShadowGroup in shadow mode), which
// holds nothing until this binds it to access.ControllerClusterRole
// (access.ShadowClusterRole). Its physical ID is the name of the
// ClusterRole and binding, unique per stack, so a second stack for the
// same cluster (or a rename) never deletes another's rights.
const accessResourceType = "Custom::NodewrightAccess"

// propAccessName names the ClusterRole and its binding.
const propAccessName = "Name"

// propAccessMode is the stack's mode (settings.ModeNormal when absent). A
// shadow-mode stack maps its controller role to access.ShadowGroup, which
// this binds to the read-only access.ShadowClusterRole instead: shadow mode
// reads what the controllers read and nothing else, no Secret included. The
// stack names the two differently, so switching modes replaces the
// resource and the old one's Delete removes the other mode's rights.
const propAccessMode = "Mode"

// accessMode reads propAccessMode.
func accessMode(props map[string]interface{}) (string, error) {
	switch m, _ := props[propAccessMode].(string); m {
	case "", settings.ModeNormal:
		return settings.ModeNormal, nil
	case settings.ModeShadow:
		return settings.ModeShadow, nil
	default:
		return "", fmt.Errorf("resource property %s %q: want %q or %q", propAccessMode, m, settings.ModeNormal, settings.ModeShadow)
	}
}

func (r *registrar) handleAccess(ctx context.Context, ev cfn.Event) (string, map[string]interface{}, error) {
	clusterName, _ := ev.ResourceProperties[propClusterName].(string)
	name, _ := ev.ResourceProperties[propAccessName].(string)
	if clusterName == "" || name == "" {
		return ev.PhysicalResourceID, nil, fmt.Errorf("resource properties %s and %s are required", propClusterName, propAccessName)
	}
	mode, modeErr := accessMode(ev.ResourceProperties)
	log := r.log.With("request-type", ev.RequestType, "logical-id", ev.LogicalResourceID, "cluster", clusterName, "mode", mode)
	switch ev.RequestType {
	case cfn.RequestCreate, cfn.RequestUpdate:
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return "", nil, fmt.Errorf("resource property %s %q: %s", propAccessName, name, strings.Join(msgs, "; "))
		}
		if modeErr != nil {
			return "", nil, modeErr
		}
		kc, found, err := r.cluster(ctx, clusterName)
		if err != nil {
			return "", nil, err
		}
		if !found {
			return "", nil, fmt.Errorf("EKS cluster %s not found", clusterName)
		}
		apply := kube.ApplyControllerAccess
		if mode == settings.ModeShadow {
			apply = kube.ApplyShadowAccess
		}
		if err := r.untilAuthorized(ctx, "apply RBAC "+name, func() error { return apply(ctx, kc, name) }); err != nil {
			return "", nil, err
		}
		log.Info("controller RBAC applied", "name", name)
		return name, map[string]interface{}{"Name": name}, nil
	case cfn.RequestDelete:
		if len(validation.IsDNS1123Subdomain(ev.PhysicalResourceID)) > 0 {
			return ev.PhysicalResourceID, nil, nil // a create that failed before naming anything
		}
		// The controllers' functions are deleted before this resource, so
		// the lifecycle function cannot put the finalizers back. Not for a
		// shadow-mode resource: shadow mode adds no finalizer, and its
		// Delete may come after a switch to normal mode, whose controllers
		// own the finalizers now.
		if table, _ := ev.ResourceProperties[propTableName].(string); mode != settings.ModeShadow {
			r.releaseFinalizers(ctx, log, clusterName, table)
		}
		kc, found, err := r.cluster(ctx, clusterName)
		if err != nil || !found {
			return ev.PhysicalResourceID, nil, err
		}
		if err := r.untilAuthorized(ctx, "remove controller RBAC "+ev.PhysicalResourceID, func() error { return kube.RemoveControllerAccess(ctx, kc, ev.PhysicalResourceID) }); err != nil {
			return ev.PhysicalResourceID, nil, err
		}
		log.Info("controller RBAC removed", "name", ev.PhysicalResourceID)
		return ev.PhysicalResourceID, nil, nil
	default:
		return ev.PhysicalResourceID, nil, fmt.Errorf("unknown request type %q", ev.RequestType)
	}
}
