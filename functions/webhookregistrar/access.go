package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/cfn"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodewright/nodewright/internal/kube"
)

// accessResourceType is the custom resource that gives the controllers
// their Kubernetes rights: the stack maps the controller role's access
// entry to access.ControllerGroup, which holds nothing until this binds
// it to access.ControllerClusterRole. Its physical ID is the name of the
// ClusterRole and binding, unique per stack, so a second stack for the
// same cluster (or a rename) never deletes another's rights.
const accessResourceType = "Custom::NodewrightAccess"

// propAccessName names the ClusterRole and its binding.
const propAccessName = "Name"

func (r *registrar) handleAccess(ctx context.Context, ev cfn.Event) (string, map[string]interface{}, error) {
	clusterName, _ := ev.ResourceProperties[propClusterName].(string)
	name, _ := ev.ResourceProperties[propAccessName].(string)
	if clusterName == "" || name == "" {
		return ev.PhysicalResourceID, nil, fmt.Errorf("resource properties %s and %s are required", propClusterName, propAccessName)
	}
	log := r.log.With("request-type", ev.RequestType, "logical-id", ev.LogicalResourceID, "cluster", clusterName)
	switch ev.RequestType {
	case cfn.RequestCreate, cfn.RequestUpdate:
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return "", nil, fmt.Errorf("resource property %s %q: %s", propAccessName, name, strings.Join(msgs, "; "))
		}
		kc, found, err := r.cluster(ctx, clusterName)
		if err != nil {
			return "", nil, err
		}
		if !found {
			return "", nil, fmt.Errorf("EKS cluster %s not found", clusterName)
		}
		if err := r.untilAuthorized(ctx, "apply controller RBAC "+name, func() error { return kube.ApplyControllerAccess(ctx, kc, name) }); err != nil {
			return "", nil, err
		}
		log.Info("controller RBAC applied", "name", name)
		return name, map[string]interface{}{"Name": name}, nil
	case cfn.RequestDelete:
		if len(validation.IsDNS1123Subdomain(ev.PhysicalResourceID)) > 0 {
			return ev.PhysicalResourceID, nil, nil // a create that failed before naming anything
		}
		// The controllers' functions are deleted before this resource, so
		// the lifecycle function cannot put the finalizers back.
		table, _ := ev.ResourceProperties[propTableName].(string)
		r.releaseFinalizers(ctx, log, clusterName, table)
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
