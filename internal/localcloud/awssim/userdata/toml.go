package userdata

import (
	"fmt"
	"strconv"
	"strings"
)

// parseBottlerocket reads the [settings.kubernetes] tables of Bottlerocket
// user data. Only the TOML that Bottlerocket settings use is understood:
// tables with dotted (optionally quoted) names, and key = string | integer |
// boolean | array of strings.
func parseBottlerocket(doc string) (*Bootstrap, error) {
	b := newBootstrap(FormatBottlerocket)
	table := ""
	for n, raw := range strings.Split(doc, "\n") {
		line := strings.TrimSpace(stripComment(raw))
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") || strings.HasPrefix(line, "[[") {
				return nil, fmt.Errorf("bottlerocket user data line %d: unsupported table header %q", n+1, line)
			}
			table = joinKey(strings.TrimSpace(line[1 : len(line)-1]))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("bottlerocket user data line %d: %q is not key = value", n+1, line)
		}
		key := joinKey(strings.TrimSpace(k))
		val, err := tomlValue(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("bottlerocket user data line %d: %w", n+1, err)
		}
		full := key
		if table != "" {
			full = table + "." + key
		}
		if err := b.applyBottlerocket(full, table, key, val); err != nil {
			return nil, fmt.Errorf("bottlerocket user data line %d: %w", n+1, err)
		}
	}
	return b, nil
}

func (b *Bootstrap) applyBottlerocket(full, table, key string, val any) error {
	const k8s = "settings.kubernetes"
	str := func() string { return fmt.Sprint(val) }
	switch {
	case full == k8s+".max-pods":
		n, ok := val.(int)
		if !ok {
			return fmt.Errorf("max-pods %v is not an integer", val)
		}
		b.MaxPods = n
	case full == k8s+".cluster-name":
		b.ClusterName = str()
	case table == k8s+".node-labels":
		b.Labels[unquote(key)] = str()
	case table == k8s+".node-taints":
		// "key" = ["value:Effect", ...] (older form: "value:Effect").
		vals, ok := val.([]string)
		if !ok {
			vals = []string{str()}
		}
		for _, ve := range vals {
			v, effect, ok := strings.Cut(ve, ":")
			if !ok {
				return fmt.Errorf("node taint %s = %q lacks an effect", key, ve)
			}
			kv := unquote(key)
			if v != "" {
				kv += "=" + v
			}
			if err := b.addTaint(kv, effect); err != nil {
				return err
			}
		}
	case table == k8s+".kube-reserved":
		b.KubeReserved[unquote(key)] = str()
	case table == k8s+".system-reserved":
		b.SystemReserved[unquote(key)] = str()
	case table == k8s+".eviction-hard":
		b.EvictionHard[unquote(key)] = str()
	}
	return nil
}

func stripComment(s string) string {
	inStr := false
	for i, r := range s {
		switch {
		case r == '"':
			inStr = !inStr
		case r == '#' && !inStr:
			return s[:i]
		}
	}
	return s
}

// joinKey normalizes a dotted key, keeping quoted segments (which may contain dots) intact.
func joinKey(s string) string {
	var parts []string
	var cur strings.Builder
	inStr := false
	for _, r := range s {
		switch {
		case r == '"':
			inStr = !inStr
			cur.WriteRune(r)
		case r == '.' && !inStr:
			parts = append(parts, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	parts = append(parts, strings.TrimSpace(cur.String()))
	return strings.Join(parts, ".")
}

func unquote(s string) string { return strings.Trim(s, `"`) }

func tomlValue(v string) (any, error) {
	switch {
	case strings.HasPrefix(v, `"`):
		s, err := strconv.Unquote(v)
		if err != nil {
			return nil, fmt.Errorf("bad string %s", v)
		}
		return s, nil
	case strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'") && len(v) >= 2:
		return v[1 : len(v)-1], nil
	case v == "true" || v == "false":
		return v == "true", nil
	case strings.HasPrefix(v, "["):
		if !strings.HasSuffix(v, "]") {
			return nil, fmt.Errorf("multi-line arrays are not supported: %s", v)
		}
		var out []string
		for _, e := range splitNonEmpty(v[1 : len(v)-1]) {
			s, err := tomlValue(e)
			if err != nil {
				return nil, err
			}
			str, ok := s.(string)
			if !ok {
				return nil, fmt.Errorf("only arrays of strings are supported: %s", v)
			}
			out = append(out, str)
		}
		return out, nil
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil {
		return nil, fmt.Errorf("unsupported value %s", v)
	}
	return n, nil
}
