package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/settings"
)

// trust is what the stack deployed the registrar for: per custom resource
// type, the properties its resources have (the CA bundle as a digest, as
// Lambda's 4 KB environment cannot hold the bundle). The stack sets it as
// the registrar's environment (infra's registrarTrust), so it changes only
// with a deployment.
//
// Why: the registrar holds cluster-admin for the stack's lifetime, and its
// invocation event is whatever the invoker sends. Anyone allowed to invoke
// the function could otherwise register the cluster's webhook at a URL of
// their own with a CA of their own, bind the controllers' rights to another
// name, or point the finalizer release at another table. An event whose
// properties differ from the stack's is refused before the cluster is
// touched.
type trust map[string]map[string]string

// caDigestProp is the trusted form of the CA bundle property
// (admission.CABundleDigestProperty).
const caDigestProp = admission.CABundleDigestProperty

// trustFromEnv reads the stack's properties from the environment.
func trustFromEnv(getenv func(string) string) (trust, error) {
	raw := getenv(settings.EnvRegistrarTrust)
	if raw == "" {
		return nil, fmt.Errorf("%s is not set: the stack sets it to the properties of its custom resources, and without it no event can be trusted", settings.EnvRegistrarTrust)
	}
	var t trust
	if err := json.Unmarshal([]byte(raw), &t); err != nil {
		return nil, fmt.Errorf("%s: %w", settings.EnvRegistrarTrust, err)
	}
	if len(t) == 0 {
		return nil, fmt.Errorf("%s names no resource type", settings.EnvRegistrarTrust)
	}
	return t, nil
}

// check refuses an event for a resource type the stack does not have, or
// whose properties (or, on update and delete, physical ID) differ from the
// stack's. The properties' names are given, never their values.
func (t trust) check(ev cfn.Event) error {
	want, ok := t[ev.ResourceType]
	if !ok {
		return fmt.Errorf("refused: resource type %q is not one of this stack's", ev.ResourceType)
	}
	if ev.ResourceType == accessResourceType && ev.RequestType == cfn.RequestDelete {
		return checkAccessDelete(ev, want)
	}
	var differ []string
	for name, v := range want {
		if strings.HasPrefix(name, stackProp) {
			continue
		}
		got, _ := ev.ResourceProperties[name].(string)
		if name == caDigestProp {
			got, _ = ev.ResourceProperties[propCABundle].(string)
			got = admission.CABundleDigest(got)
		}
		if got != v {
			differ = append(differ, strings.TrimSuffix(name, "SHA256"))
		}
	}
	if len(differ) > 0 {
		sort.Strings(differ)
		return fmt.Errorf("refused: resource properties %s differ from the stack's (the registrar acts only on what its stack deployed)", strings.Join(differ, ", "))
	}
	if ev.RequestType != cfn.RequestCreate && ev.PhysicalResourceID != "" && !physicalIDMatches(ev, want) {
		return fmt.Errorf("refused: physical resource ID %q is not this stack's resource", ev.PhysicalResourceID)
	}
	return nil
}

// stackProp starts the trust's entries that are the stack's own facts
// rather than a resource's properties (StackTableName).
const stackProp = "Stack"

// checkAccessDelete: switching a stack between normal and shadow mode
// replaces its access resource (their names differ), and CloudFormation
// then deletes the old one with the old mode's properties, which the trust
// no longer holds. A delete is accepted for either mode's name of this
// stack, in this cluster, naming no table but the stack's own (a Delete
// releases the Node finalizers of the claims in its TableName).
func checkAccessDelete(ev cfn.Event, want map[string]string) error {
	if got, _ := ev.ResourceProperties[propClusterName].(string); got != want[propClusterName] {
		return fmt.Errorf("refused: resource property %s differs from the stack's", propClusterName)
	}
	if got, _ := ev.ResourceProperties[propTableName].(string); got != "" && got != want[stackProp+propTableName] {
		return fmt.Errorf("refused: resource property %s differs from the stack's", propTableName)
	}
	if strings.ContainsAny(ev.PhysicalResourceID, "/[]$") {
		return nil // a failed create's placeholder: nothing to delete
	}
	name, _ := ev.ResourceProperties[propAccessName].(string)
	if ev.PhysicalResourceID != name || !slices.Contains(accessNames(want[propAccessName]), name) {
		return fmt.Errorf("refused: physical resource ID %q is not this stack's access resource", ev.PhysicalResourceID)
	}
	return nil
}

// accessNames are the names the stack gives its access resource in either
// mode (infra: nodewright-controller-<stack>, nodewright-shadow-<stack>).
func accessNames(trusted string) []string {
	for _, prefix := range []string{"nodewright-controller-", "nodewright-shadow-"} {
		if stack, ok := strings.CutPrefix(trusted, prefix); ok {
			return []string{"nodewright-controller-" + stack, "nodewright-shadow-" + stack}
		}
	}
	return []string{trusted}
}

// physicalIDMatches: a resource's physical ID is the name property the
// registrar returned for it (webhook or access name). A create that failed
// before naming anything has the placeholder ID aws-lambda-go's cfn wrapper
// gives it (the log stream's name), which names nothing in the cluster and
// is let through for the no-op delete.
func physicalIDMatches(ev cfn.Event, want map[string]string) bool {
	name := want[propWebhookName]
	if ev.ResourceType == accessResourceType {
		name = want[propAccessName]
	}
	return ev.PhysicalResourceID == name || strings.ContainsAny(ev.PhysicalResourceID, "/[]$")
}

// serve is the Lambda entry point: every event is checked against the
// stack's properties before handle acts on it.
func (r *registrar) serve(ctx context.Context, ev cfn.Event) (string, map[string]interface{}, error) {
	err := r.trustErr
	if err == nil {
		err = r.trust.check(ev)
	}
	if err != nil {
		r.log.Error("custom resource event refused", "request-type", ev.RequestType, "resource-type", ev.ResourceType, "logical-id", ev.LogicalResourceID, "error", err.Error())
		if ev.PhysicalResourceID == "" {
			return "", nil, err
		}
		return ev.PhysicalResourceID, nil, err
	}
	return r.handle(ctx, ev)
}
