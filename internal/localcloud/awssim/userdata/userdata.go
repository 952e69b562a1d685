// Package userdata reads what a node's bootstrap would read from EC2 user
// data: node labels, taints, max pods and reserved resources, from AL2023
// nodeadm NodeConfig (plain or in MIME multipart), AL2 bootstrap.sh
// arguments, Bottlerocket TOML settings and the Windows AMIs' PowerShell
// Start-EKSBootstrap.ps1 call.
package userdata

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Format names the bootstrap flavour of a user data document.
type Format string

const (
	FormatAL2023       Format = "al2023"
	FormatAL2          Format = "al2"
	FormatBottlerocket Format = "bottlerocket"
	FormatNone         Format = "none"
)

// Bootstrap is the kubelet configuration a node registers with.
type Bootstrap struct {
	Format         Format
	ClusterName    string
	Labels         map[string]string
	Taints         []corev1.Taint
	MaxPods        int // 0 = not set (kubelet default)
	KubeReserved   map[string]string
	SystemReserved map[string]string
	EvictionHard   map[string]string
}

func newBootstrap(f Format) *Bootstrap {
	return &Bootstrap{Format: f, Labels: map[string]string{}, KubeReserved: map[string]string{}, SystemReserved: map[string]string{}, EvictionHard: map[string]string{}}
}

// ParseBase64 decodes EC2's base64 user data and parses it.
func ParseBase64(b64 string) (*Bootstrap, error) {
	if b64 == "" {
		return newBootstrap(FormatNone), nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("user data is not base64: %w", err)
	}
	return Parse(string(raw))
}

// Parse detects the format of user data and extracts the kubelet settings.
func Parse(doc string) (*Bootstrap, error) {
	trimmed := strings.TrimSpace(doc)
	switch {
	case trimmed == "":
		return newBootstrap(FormatNone), nil
	case isWindowsBootstrap(doc):
		return parseWindows(doc)
	case strings.Contains(doc, "Content-Type: multipart/"), strings.HasPrefix(trimmed, "MIME-Version:"):
		return parseMIME(doc)
	case strings.Contains(doc, "node.eks.aws/") && strings.Contains(doc, "NodeConfig"):
		b := newBootstrap(FormatAL2023)
		return b, b.applyNodeConfig(doc)
	case strings.Contains(doc, "[settings"):
		return parseBottlerocket(doc)
	case strings.Contains(doc, "bootstrap.sh"):
		b := newBootstrap(FormatAL2)
		return b, b.applyBootstrapScript(doc)
	}
	return newBootstrap(FormatNone), nil
}

// applyFlags reads kubelet command-line flags.
func (b *Bootstrap) applyFlags(args []string) error {
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "--") {
			continue
		}
		if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			val = args[i+1]
			i++
		}
		val = strings.Trim(val, `"'`)
		var err error
		switch name {
		case "node-labels":
			err = parsePairs(val, b.Labels, "node label")
		case "register-with-taints":
			err = b.addTaints(val)
		case "max-pods":
			b.MaxPods, err = strconv.Atoi(val)
			if err != nil {
				err = fmt.Errorf("--max-pods %q is not a number", val)
			}
		case "kube-reserved":
			err = parsePairs(val, b.KubeReserved, "kube-reserved")
		case "system-reserved":
			err = parsePairs(val, b.SystemReserved, "system-reserved")
		case "eviction-hard":
			for _, kv := range splitNonEmpty(val) {
				k, v, ok := strings.Cut(kv, "<")
				if !ok {
					return fmt.Errorf("--eviction-hard entry %q is not signal<quantity", kv)
				}
				b.EvictionHard[k] = v
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// addTaints parses key[=value]:Effect[,...].
func (b *Bootstrap) addTaints(s string) error {
	for _, t := range splitNonEmpty(s) {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return fmt.Errorf("taint %q lacks an effect", t)
		}
		if err := b.addTaint(kv, effect); err != nil {
			return err
		}
	}
	return nil
}

func (b *Bootstrap) addTaint(kv, effect string) error {
	k, v, _ := strings.Cut(kv, "=")
	switch corev1.TaintEffect(effect) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return fmt.Errorf("taint %s has unknown effect %q", kv, effect)
	}
	if k == "" {
		return fmt.Errorf("taint %q has an empty key", kv)
	}
	b.Taints = append(b.Taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	return nil
}

func parsePairs(s string, into map[string]string, what string) error {
	for _, kv := range splitNonEmpty(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%s %q is not key=value", what, kv)
		}
		into[k] = v
	}
	return nil
}

// splitNonEmpty splits a comma-separated list, dropping blank items.
func splitNonEmpty(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
