package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/admission"
)

// Resource properties set by the CDK stack (infra/webhook.go). CloudFormation
// passes every property value as a string.
const (
	propClusterName = "ClusterName"
	propWebhookName = "WebhookName"
	propFunctionURL = "FunctionUrl"
	propPathPrefix  = "PathPrefix"
	propSecretArn   = "SecretArn"
	propCABundle    = "CABundle"
)

// webhookResourceType is the webhook registration's custom resource type
// (infra's registrarResource; accessResourceType is the other).
const webhookResourceType = "Custom::NodewrightWebhook"

const (
	managedByLabel = access.ManagedByLabel
	managedByValue = access.ManagedByValue
)

// registrar serves the custom resource.
type registrar struct {
	log     *slog.Logger
	cluster clusterClients
	secrets secretValue
	// putSecret writes the rotated webhook secret.
	putSecret putSecret
	// claims, when set, lets Delete release nodewright's Node finalizers.
	claims claimLister
	// trust is what the stack deployed (serve refuses anything else);
	// trustErr why it could not be read.
	trust    trust
	trustErr error
	// authWait and authRetry tune untilAuthorized (0: the defaults).
	authWait, authRetry time.Duration
}

type webhookProps struct {
	clusterName, name, functionURL, pathPrefix, secretArn, caBundle string
}

func parseProps(p map[string]interface{}) (webhookProps, error) {
	get := func(key string, required bool) (string, error) {
		v, ok := p[key]
		if !ok || v == nil {
			if required {
				return "", fmt.Errorf("resource property %s is missing", key)
			}
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("resource property %s: want a string, got %T", key, v)
		}
		if required && s == "" {
			return "", fmt.Errorf("resource property %s is empty", key)
		}
		return s, nil
	}
	var w webhookProps
	var errs []error
	for _, f := range []struct {
		key      string
		dst      *string
		required bool
	}{
		{propClusterName, &w.clusterName, true},
		{propWebhookName, &w.name, true},
		{propFunctionURL, &w.functionURL, true},
		{propPathPrefix, &w.pathPrefix, false},
		{propSecretArn, &w.secretArn, true},
		{propCABundle, &w.caBundle, false},
	} {
		v, err := get(f.key, f.required)
		errs = append(errs, err)
		*f.dst = v
	}
	if err := errors.Join(errs...); err != nil {
		return w, err
	}
	if msgs := validation.IsDNS1123Subdomain(w.name); len(msgs) > 0 {
		return w, fmt.Errorf("resource property %s %q: %s", propWebhookName, w.name, strings.Join(msgs, "; "))
	}
	u, err := url.Parse(w.functionURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return w, fmt.Errorf("resource property %s %q: want an https URL", propFunctionURL, w.functionURL)
	}
	return w, nil
}

// handle is the cfn.CustomResourceFunction. The physical resource ID is the
// ValidatingWebhookConfiguration's name, so renaming it makes CloudFormation
// create the new one and then delete the old one.
func (r *registrar) handle(ctx context.Context, ev cfn.Event) (string, map[string]interface{}, error) {
	if ev.ResourceType == accessResourceType {
		return r.handleAccess(ctx, ev)
	}
	log := r.log.With("request-type", ev.RequestType, "logical-id", ev.LogicalResourceID, "physical-id", ev.PhysicalResourceID)
	switch ev.RequestType {
	case cfn.RequestCreate, cfn.RequestUpdate:
		w, err := parseProps(ev.ResourceProperties)
		if err != nil {
			return "", nil, err
		}
		if err := r.register(ctx, w); err != nil {
			return "", nil, err
		}
		log.Info("webhook configuration registered", "name", w.name, "cluster", w.clusterName)
		return w.name, map[string]interface{}{"Name": w.name}, nil
	case cfn.RequestDelete:
		clusterName, _ := ev.ResourceProperties[propClusterName].(string)
		if clusterName == "" {
			return ev.PhysicalResourceID, nil, fmt.Errorf("resource property %s is missing", propClusterName)
		}
		removed, err := r.unregister(ctx, clusterName, ev.PhysicalResourceID)
		if err != nil {
			return ev.PhysicalResourceID, nil, err
		}
		log.Info("webhook configuration delete", "name", ev.PhysicalResourceID, "cluster", clusterName, "removed", removed)
		return ev.PhysicalResourceID, nil, nil
	default:
		return ev.PhysicalResourceID, nil, fmt.Errorf("unknown request type %q", ev.RequestType)
	}
}

func (r *registrar) register(ctx context.Context, w webhookProps) error {
	secret, err := r.secrets(ctx, w.secretArn)
	if err != nil {
		return err
	}
	kc, found, err := r.cluster(ctx, w.clusterName)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("EKS cluster %s not found", w.clusterName)
	}
	return r.untilAuthorized(ctx, "register "+w.name, func() error { return apply(ctx, kc, desiredConfiguration(w, secret)) })
}

// unregister deletes the configuration if nodewright manages it. A cluster
// that no longer exists has nothing to remove.
func (r *registrar) unregister(ctx context.Context, clusterName, name string) (bool, error) {
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		// A create that failed before naming anything: nothing to remove.
		return false, nil
	}
	kc, found, err := r.cluster(ctx, clusterName)
	if err != nil {
		return false, err
	}
	if !found {
		return false, nil
	}
	var removed bool
	err = r.untilAuthorized(ctx, "unregister "+name, func() error {
		var err error
		removed, err = remove(ctx, kc, name)
		return err
	})
	return removed, err
}

// endpointURL is the function URL with the shared secret as the last path
// segment: webhook client configs allow no custom headers and no query
// string.
func endpointURL(functionURL, pathPrefix, secret string) string {
	prefix := "/" + strings.Trim(pathPrefix, "/")
	if prefix != "/" {
		prefix += "/"
	}
	return strings.TrimSuffix(functionURL, "/") + prefix + admission.SecretPathSegment(secret)
}

func desiredConfiguration(w webhookProps, secret string) *admissionv1.ValidatingWebhookConfiguration {
	var ca []byte
	if w.caBundle != "" {
		ca = []byte(w.caBundle)
	}
	labels := map[string]string{
		managedByLabel:               managedByValue,
		"nodewright.io/cluster-name": truncateLabel(w.clusterName),
	}
	return admission.WebhookConfiguration(w.name, labels, endpointURL(w.functionURL, w.pathPrefix, secret), ca)
}

// truncateLabel keeps a cluster name (up to 100 characters) within the 63
// characters a label value allows; the label is informational only.
func truncateLabel(s string) string {
	if len(s) > validation.LabelValueMaxLength {
		s = s[:validation.LabelValueMaxLength]
	}
	return strings.TrimRight(s, "-_.")
}

func apply(ctx context.Context, kc kubernetes.Interface, want *admissionv1.ValidatingWebhookConfiguration) error {
	api := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	_, err := api.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", want.Name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Labels[managedByLabel] != managedByValue {
			return fmt.Errorf("a ValidatingWebhookConfiguration named %s exists and is not managed by nodewright (label %s=%s missing); refusing to overwrite it",
				want.Name, managedByLabel, managedByValue)
		}
		next := want.DeepCopy()
		next.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, next, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update ValidatingWebhookConfiguration %s: %w", want.Name, err)
	}
	return nil
}

func remove(ctx context.Context, kc kubernetes.Interface, name string) (bool, error) {
	api := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cur, err := api.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", name, err)
	}
	if cur.Labels[managedByLabel] != managedByValue {
		// Not ours (someone reused the name): leave it alone.
		return false, nil
	}
	err = api.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("delete ValidatingWebhookConfiguration %s: %w", name, err)
	}
	return err == nil, nil
}
