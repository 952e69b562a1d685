package karpenterawsdiff

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"sigs.k8s.io/yaml"
)

// decodeUserData turns a template's base64 user data into a tree the
// flattener compares field by field: a MIME archive by part (keyed by
// content type and its index among parts of that type), a NodeConfig by
// its fields, a Bottlerocket TOML document by its settings, a script by
// its lines besides the bootstrap call and that call's arguments.
func decodeUserData(b64 string) (any, error) {
	if b64 == "" {
		return nil, nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("user data is not base64: %w", err)
	}
	s := strings.ReplaceAll(string(raw), "\r\n", "\n")
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "MIME-Version:") || strings.HasPrefix(t, "Content-Type:") {
		return mimeParts(s)
	}
	var settings map[string]any
	if _, err := toml.Decode(s, &settings); err == nil && settings["settings"] != nil {
		return map[string]any{"toml": settings}, nil
	}
	return script(s), nil
}

func mimeParts(s string) (any, error) {
	msg, err := mail.ReadMessage(strings.NewReader(s))
	if err != nil {
		return nil, fmt.Errorf("MIME user data: %w", err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") {
		return nil, fmt.Errorf("MIME user data: Content-Type %q is not multipart", msg.Header.Get("Content-Type"))
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	out := map[string]any{}
	count := map[string]int{}
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("MIME user data part: %w", err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("MIME user data part: %w", err)
		}
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		key := fmt.Sprintf("part[%s#%d]", ct, count[ct])
		count[ct]++
		if ct == "application/node.eks.aws" {
			out[key], err = nodeConfig(string(body))
			if err != nil {
				return nil, err
			}
			continue
		}
		out[key] = script(string(body))
	}
}

// nodeConfig decodes nodeadm's YAML documents; the kubelet's flags are
// keyed by name, their label and taint lists by label and taint.
func nodeConfig(s string) (any, error) {
	var docs []any
	for _, d := range strings.Split("\n"+s, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			return nil, fmt.Errorf("NodeConfig: %w", err)
		}
		if m == nil {
			continue
		}
		if spec, ok := m["spec"].(map[string]any); ok {
			if k, ok := spec["kubelet"].(map[string]any); ok {
				if flags, ok := k["flags"].([]any); ok {
					k["flags"] = kubeletFlags(flags)
				}
			}
		}
		docs = append(docs, m)
	}
	return map[string]any{"docs": docs}, nil
}

func kubeletFlags(flags []any) map[string]any {
	out := map[string]any{}
	for _, f := range flags {
		name, value, _ := strings.Cut(fmt.Sprint(f), "=")
		out[name] = flagValue(name, unquote(value))
	}
	return out
}

// flagValue splits the kubelet flags that hold lists.
func flagValue(name, value string) any {
	switch name {
	case "--node-labels":
		labels := map[string]any{}
		for _, kv := range strings.Split(value, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = v
			}
		}
		return labels
	case "--register-with-taints":
		taints := map[string]any{}
		for _, t := range strings.Split(value, ",") {
			if t != "" {
				taints[t] = "true"
			}
		}
		return taints
	}
	return value
}

// unquote drops one pair of quotes around a flag's value: nodeadm and the
// bootstrap scripts pass the value through a shell or an environment file
// either way, and label and taint values cannot hold spaces or quotes.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// bootstrapCommands are the calls that take the kubelet's settings as
// arguments (AL2's bootstrap.sh, the Windows EKS bootstrap script).
var bootstrapCommands = []string{"/etc/eks/bootstrap.sh", "$EKSBootstrapScriptFile"}

// script is a script's other lines and its bootstrap call's arguments.
func script(s string) map[string]any {
	out := map[string]any{}
	var lines []string
	var call string
	all := strings.Split(strings.ReplaceAll(s, "\\\n", " "), "\n")
	for _, l := range all {
		l = strings.TrimRight(l, " \t")
		if isBootstrapCall(l) {
			call = l
			continue
		}
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	out["lines"] = strings.Join(lines, "\n")
	if call != "" {
		out["bootstrap"] = bootstrapArgs(call)
	}
	return out
}

func isBootstrapCall(l string) bool {
	l = strings.TrimSpace(l)
	for _, c := range bootstrapCommands {
		if strings.HasPrefix(l, c) || strings.HasPrefix(l, "& "+c) {
			return true
		}
	}
	return false
}

// bootstrapArgs keys a bootstrap call's arguments by flag; the kubelet's
// extra arguments are split into flags too.
func bootstrapArgs(call string) map[string]any {
	words := shellWords(call)
	out := map[string]any{}
	pos := 0
	for i := 0; i < len(words); i++ {
		w := words[i]
		if i == 0 || w == "&" || strings.HasPrefix(w, "$EKSBootstrapScriptFile") || strings.HasSuffix(w, "bootstrap.sh") {
			continue
		}
		if !strings.HasPrefix(w, "-") {
			out["arg"+strconv.Itoa(pos)] = w
			pos++
			continue
		}
		name, value, inline := strings.Cut(w, "=")
		extra := strings.EqualFold(name, "--kubelet-extra-args") || strings.EqualFold(name, "-KubeletExtraArgs")
		if !inline && i+1 < len(words) && (extra || !strings.HasPrefix(words[i+1], "-")) {
			value = words[i+1]
			i++
		}
		if extra {
			flags := []any{}
			for _, f := range shellWords(value) {
				flags = append(flags, f)
			}
			out[name] = kubeletFlags(flags)
			continue
		}
		out[name] = value
	}
	return out
}

// shellWords splits a command line as a POSIX shell (or PowerShell, for
// the quoting the scripts use) would: quotes group, backslashes escape
// outside single quotes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
