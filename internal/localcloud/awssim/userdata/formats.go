package userdata

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"

	"sigs.k8s.io/yaml"
)

// parseMIME walks a multipart user data document: NodeConfig parts
// (application/node.eks.aws) and shell scripts calling bootstrap.sh.
func parseMIME(doc string) (*Bootstrap, error) {
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimLeft(doc, "\r\n")))
	if err != nil {
		return nil, fmt.Errorf("user data MIME headers: %w", err)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, fmt.Errorf("user data MIME content type %q has no boundary", msg.Header.Get("Content-Type"))
	}
	b := newBootstrap(FormatNone)
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("user data MIME part: %w", err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("user data MIME part: %w", err)
		}
		ct := p.Header.Get("Content-Type")
		switch {
		case strings.HasPrefix(ct, "application/node.eks.aws"):
			b.Format = FormatAL2023
			if err := b.applyNodeConfig(string(body)); err != nil {
				return nil, err
			}
		case strings.Contains(string(body), "bootstrap.sh"):
			b.Format = FormatAL2
			if err := b.applyBootstrapScript(string(body)); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

type nodeConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Cluster struct {
			Name string `json:"name"`
		} `json:"cluster"`
		Kubelet struct {
			Config map[string]any `json:"config"`
			Flags  []string       `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

// applyNodeConfig merges one or more YAML NodeConfig documents.
func (b *Bootstrap) applyNodeConfig(doc string) error {
	for _, part := range strings.Split(doc, "\n---") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		var nc nodeConfig
		if err := yaml.Unmarshal([]byte(part), &nc); err != nil {
			return fmt.Errorf("NodeConfig: %w", err)
		}
		if nc.Kind != "NodeConfig" {
			continue
		}
		if nc.Spec.Cluster.Name != "" {
			b.ClusterName = nc.Spec.Cluster.Name
		}
		cfg := nc.Spec.Kubelet.Config
		if v, ok := cfg["maxPods"]; ok {
			n, ok := v.(float64)
			if !ok {
				return fmt.Errorf("NodeConfig kubelet.config.maxPods %v is not a number", v)
			}
			b.MaxPods = int(n)
		}
		for key, into := range map[string]map[string]string{"kubeReserved": b.KubeReserved, "systemReserved": b.SystemReserved, "evictionHard": b.EvictionHard} {
			if m, ok := cfg[key].(map[string]any); ok {
				for k, v := range m {
					into[k] = fmt.Sprint(v)
				}
			}
		}
		if taints, ok := cfg["registerWithTaints"].([]any); ok {
			for _, t := range taints {
				m, _ := t.(map[string]any)
				kv := fmt.Sprint(m["key"])
				if v, ok := m["value"]; ok && v != "" {
					kv += "=" + fmt.Sprint(v)
				}
				if err := b.addTaint(kv, fmt.Sprint(m["effect"])); err != nil {
					return fmt.Errorf("NodeConfig registerWithTaints: %w", err)
				}
			}
		}
		if err := b.applyFlags(nc.Spec.Kubelet.Flags); err != nil {
			return fmt.Errorf("NodeConfig kubelet.flags: %w", err)
		}
	}
	return nil
}

// applyBootstrapScript finds bootstrap.sh calls and reads their
// --kubelet-extra-args.
func (b *Bootstrap) applyBootstrapScript(script string) error {
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(script, "\\\n", " ")))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "bootstrap.sh")
		if i < 0 || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		words, err := shellWords(line[i+len("bootstrap.sh"):])
		if err != nil {
			return fmt.Errorf("bootstrap.sh arguments: %w", err)
		}
		for j := 0; j < len(words); j++ {
			switch {
			case j == 0 && !strings.HasPrefix(words[j], "-"):
				b.ClusterName = words[j]
			case words[j] == "--kubelet-extra-args" && j+1 < len(words):
				inner, err := shellWords(words[j+1])
				if err != nil {
					return fmt.Errorf("--kubelet-extra-args: %w", err)
				}
				if err := b.applyFlags(inner); err != nil {
					return fmt.Errorf("--kubelet-extra-args: %w", err)
				}
				j++
			}
		}
	}
	return sc.Err()
}

// shellWords splits a command line with POSIX-ish quoting.
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == ';' || r == '&' || r == '|':
			if inWord {
				out = append(out, cur.String())
			}
			return out, nil
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}
