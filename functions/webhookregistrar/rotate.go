package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Why rotate: the kube-apiserver calls the webhook at a URL whose last path
// segment is the shared secret (a webhook's clientConfig has only url,
// service and caBundle: no headers, and the apiserver cannot SigV4-sign for
// an AWS_IAM function URL), and it writes that URL into its error message
// on every call that fails open, so the secret reaches the EKS control
// plane's logs. It cannot leave the URL; what a leaked value is worth can
// be bounded: the stack's schedule rotates it (webhookSecretRotationDays),
// and the webhook accepts only the current and the previous value.

// putSecret writes a new current value of a Secrets Manager secret (the
// old one becomes AWSPREVIOUS).
type putSecret func(ctx context.Context, arn, value string) error

type putSecretValue interface {
	PutSecretValue(ctx context.Context, in *secretsmanager.PutSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
}

func secretsManagerPut(api putSecretValue) putSecret {
	return func(ctx context.Context, arn, value string) error {
		if _, err := api.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(arn), SecretString: aws.String(value)}); err != nil {
			return fmt.Errorf("put secret %s: %w", arn, err)
		}
		return nil
	}
}

// secretAlphabet and secretLength match the stack's generated secret (48
// characters, no punctuation or spaces): URL-safe as a path segment.
const (
	secretAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	secretLength   = 48
)

func newSecret() (string, error) {
	var b strings.Builder
	for range secretLength {
		i, err := rand.Int(rand.Reader, big.NewInt(int64(len(secretAlphabet))))
		if err != nil {
			return "", fmt.Errorf("new webhook secret: %w", err)
		}
		b.WriteByte(secretAlphabet[i.Int64()])
	}
	return b.String(), nil
}

// isRotation reports whether a raw invocation is the stack's rotation
// schedule (an EventBridge scheduled event) rather than a CloudFormation
// custom resource event.
func isRotation(raw json.RawMessage) bool {
	var ev struct {
		DetailType string `json:"detail-type"`
		Source     string `json:"source"`
	}
	return json.Unmarshal(raw, &ev) == nil && ev.DetailType == "Scheduled Event" && ev.Source == "aws.events"
}

// rotate gives the webhook a new secret and re-registers its URL with it.
// It works from the stack's trusted properties only, so any invoker can at
// most make it rotate. The registered URL always carries the current or
// the previous value, which the webhook both accepts: a registration that
// does not carry the current value (a rotation that failed half-way) is
// repaired first and the rotation waits for the next run, as rotating then
// would leave the registered value two versions behind.
func (r *registrar) rotate(ctx context.Context) error {
	if r.trustErr != nil {
		return r.trustErr
	}
	w, err := r.trustedWebhook()
	if err != nil {
		return err
	}
	kc, found, err := r.cluster(ctx, w.clusterName)
	if err != nil || !found {
		return fmt.Errorf("rotate the webhook secret of cluster %s: found=%v: %w", w.clusterName, found, err)
	}
	cur, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, w.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		r.log.Info("no webhook registered; nothing to rotate", "name", w.name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("rotate: get ValidatingWebhookConfiguration %s: %w", w.name, err)
	}
	current, err := r.secrets(ctx, w.secretArn)
	if err != nil {
		return err
	}
	if registeredURL(cur.Webhooks) != endpointURL(w.functionURL, w.pathPrefix, current) {
		r.log.Warn("registered webhook URL does not carry the current secret; re-registering it before rotating", "name", w.name)
		return r.setSecret(ctx, kc, w, current)
	}
	next, err := newSecret()
	if err != nil {
		return err
	}
	if err := r.putSecret(ctx, w.secretArn, next); err != nil {
		return err
	}
	if err := r.setSecret(ctx, kc, w, next); err != nil {
		return fmt.Errorf("rotated the secret, but the webhook still uses the previous value (accepted until the next rotation): %w", err)
	}
	r.log.Info("webhook secret rotated", "name", w.name, "cluster", w.clusterName)
	return nil
}

// setSecret points the registered webhook at the URL with secret, keeping
// the rest of the configuration (its CA bundle is the one the stack
// registered; the trust holds only its digest).
func (r *registrar) setSecret(ctx context.Context, kc kubernetes.Interface, w webhookProps, secret string) error {
	url := endpointURL(w.functionURL, w.pathPrefix, secret)
	api := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	return r.untilAuthorized(ctx, "rotate "+w.name, func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := api.Get(ctx, w.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.Labels[managedByLabel] != managedByValue {
				return fmt.Errorf("ValidatingWebhookConfiguration %s is not managed by nodewright; not rotating it", w.name)
			}
			for i := range cur.Webhooks {
				cur.Webhooks[i].ClientConfig.URL = &url
			}
			_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	})
}

func registeredURL(hooks []admissionv1.ValidatingWebhook) string {
	if len(hooks) == 0 || hooks[0].ClientConfig.URL == nil {
		return ""
	}
	return *hooks[0].ClientConfig.URL
}

// trustedWebhook is the webhook's properties as the stack deployed them.
func (r *registrar) trustedWebhook() (webhookProps, error) {
	want, ok := r.trust[webhookResourceType]
	if !ok {
		return webhookProps{}, fmt.Errorf("rotate: the stack registers no webhook (%s not trusted)", webhookResourceType)
	}
	p := map[string]interface{}{}
	for k, v := range want {
		p[k] = v
	}
	return parseProps(p)
}
