package admission

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// How long the webhook trusts the secrets it read. A rotated secret is
// picked up within secretTTL without a cold start; a request whose secret
// matches none of the cached ones forces a re-read, at most once per
// secretMissRefresh, so a flood of bad guesses cannot turn into a flood of
// Secrets Manager calls.
const (
	secretTTL         = time.Minute
	secretMissRefresh = 10 * time.Second
)

// NormalizeSecret is the one form of the shared secret both sides use, the
// registrar writing it into the URL and the webhook comparing it: values set
// by hand or by a rotation function often carry a trailing newline.
func NormalizeSecret(s string) string { return strings.TrimSpace(s) }

// SecretPathSegment is the secret as the registrar writes it into the
// webhook URL's last path segment (webhook client configs allow no custom
// header and no query string).
func SecretPathSegment(secret string) string { return url.PathEscape(NormalizeSecret(secret)) }

// SecretSource returns the secrets the webhook accepts now.
type SecretSource func(ctx context.Context) ([]string, error)

// StaticSecret always accepts one secret (settings, tests, the demo).
func StaticSecret(secret string) SecretSource {
	return func(context.Context) ([]string, error) { return []string{secret}, nil }
}

// SecretsGetter is the part of the Secrets Manager client the webhook uses.
type SecretsGetter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SecretsManagerSource accepts the secret's AWSCURRENT and AWSPREVIOUS
// values: after a rotation the registered URL still carries the previous
// one until the registrar re-registers, and refusing it would silently turn
// the webhook off (failurePolicy Ignore hides the 401s).
func SecretsManagerSource(api SecretsGetter, arn string) SecretSource {
	return func(ctx context.Context) ([]string, error) {
		current, err := secretStage(ctx, api, arn, "AWSCURRENT")
		if err != nil {
			return nil, err
		}
		if current == "" {
			return nil, fmt.Errorf("admission: secret %s: %w", arn, errEmptySecret)
		}
		previous, err := secretStage(ctx, api, arn, "AWSPREVIOUS")
		var nf *smtypes.ResourceNotFoundException
		switch {
		case errors.As(err, &nf):
			return []string{current}, nil // never rotated
		case err != nil:
			return nil, err
		case previous == "":
			return []string{current}, nil
		}
		return []string{current, previous}, nil
	}
}

func secretStage(ctx context.Context, api SecretsGetter, arn, stage string) (string, error) {
	out, err := api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: sdkaws.String(arn), VersionStage: sdkaws.String(stage)})
	if err != nil {
		return "", fmt.Errorf("admission: read secret %s (%s): %w", arn, stage, err)
	}
	return NormalizeSecret(sdkaws.ToString(out.SecretString)), nil
}

// secretCache holds the accepted secrets between reads. A failed read keeps
// the last good values: Secrets Manager throttling must not turn the
// webhook off either.
type secretCache struct {
	source SecretSource
	now    func() time.Time

	mu      sync.Mutex
	values  [][]byte
	fetched time.Time // of the last read, good or not
}

// matches reports whether candidate is an accepted secret, re-reading the
// secrets when they are stale, or when nothing matched and the last read is
// old enough (a rotation the cache has not seen yet).
func (c *secretCache) matches(ctx context.Context, candidates []string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var readErr error
	if c.fetched.IsZero() || c.now().Sub(c.fetched) >= secretTTL {
		readErr = c.read(ctx)
	}
	if match(candidates, c.values) {
		return true, nil
	}
	if readErr != nil || c.now().Sub(c.fetched) < secretMissRefresh {
		return false, readErr
	}
	if err := c.read(ctx); err != nil {
		return false, err
	}
	return match(candidates, c.values), nil
}

func (c *secretCache) read(ctx context.Context) error {
	c.fetched = c.now()
	got, err := c.source(ctx)
	if err != nil {
		return err
	}
	values := make([][]byte, 0, len(got))
	for _, s := range got {
		if s = NormalizeSecret(s); s != "" {
			values = append(values, []byte(s))
		}
	}
	if len(values) == 0 {
		return errEmptySecret
	}
	c.values = values
	return nil
}

// match compares in constant time per pair, so a guess learns nothing from
// the answer's timing beyond how many secrets there are.
func match(candidates []string, secrets [][]byte) bool {
	ok := 0
	for _, cand := range candidates {
		for _, s := range secrets {
			ok |= subtle.ConstantTimeCompare([]byte(cand), s)
		}
	}
	return ok == 1
}
