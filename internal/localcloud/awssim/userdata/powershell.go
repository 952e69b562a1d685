package userdata

import (
	"fmt"
	"strings"
)

// FormatWindows is the EKS-optimized Windows AMIs' PowerShell user data
// calling Start-EKSBootstrap.ps1.
const FormatWindows Format = "windows"

// windowsBootstrapMarkers are how a PowerShell script calls the Windows
// AMIs' bootstrap: through Karpenter's $EKSBootstrapScriptFile variable or
// the script's path.
var windowsBootstrapMarkers = []string{"$EKSBootstrapScriptFile", "Start-EKSBootstrap.ps1"}

// isWindowsBootstrap reports whether doc is PowerShell user data that
// bootstraps a Windows node.
func isWindowsBootstrap(doc string) bool {
	return strings.Contains(doc, "<powershell>") && strings.Contains(doc, "Start-EKSBootstrap.ps1")
}

// parseWindows reads the bootstrap call's -EKSClusterName and the kubelet
// flags of its -KubeletExtraArgs (what Start-EKSBootstrap.ps1 hands to the
// kubelet). PowerShell quoting: '...' (a doubled quote in it is one quote) or "...".
func parseWindows(doc string) (*Bootstrap, error) {
	b := newBootstrap(FormatWindows)
	for _, line := range strings.Split(doc, "\n") {
		args, ok := bootstrapCall(line)
		if !ok {
			continue
		}
		words, err := psWords(args)
		if err != nil {
			return nil, fmt.Errorf("Start-EKSBootstrap.ps1 arguments: %w", err)
		}
		for i := 0; i+1 < len(words); i++ {
			switch strings.ToLower(words[i]) {
			case "-eksclustername":
				b.ClusterName = words[i+1]
			case "-kubeletextraargs":
				inner, err := shellWords(words[i+1])
				if err != nil {
					return nil, fmt.Errorf("-KubeletExtraArgs: %w", err)
				}
				if err := b.applyFlags(inner); err != nil {
					return nil, fmt.Errorf("-KubeletExtraArgs: %w", err)
				}
			default:
				continue
			}
			i++
		}
	}
	return b, nil
}

// bootstrapCall is what follows the bootstrap script on a line that calls
// it ("& $EKSBootstrapScriptFile -EKSClusterName ..."), false on others.
func bootstrapCall(line string) (string, bool) {
	t := strings.TrimSpace(line)
	if strings.HasPrefix(t, "#") || !strings.HasPrefix(t, "&") {
		return "", false
	}
	for _, m := range windowsBootstrapMarkers {
		if i := strings.Index(t, m); i >= 0 {
			rest := strings.TrimLeft(t[i+len(m):], `"'`)
			return rest, true
		}
	}
	return "", false
}

// psWords splits PowerShell arguments: ” inside '...' is one quote.
func psWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch r {
		case '\'', '"':
			end, err := closingQuote(rs, i)
			if err != nil {
				return nil, err
			}
			cur.WriteString(strings.ReplaceAll(string(rs[i+1:end]), string([]rune{r, r}), string(r)))
			inWord, i = true, end
		case ' ', '\t', '\r':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// closingQuote is the index of the quote closing the one at open, a
// doubled quote being an escaped one.
func closingQuote(rs []rune, open int) (int, error) {
	q := rs[open]
	for j := open + 1; j < len(rs); j++ {
		if rs[j] != q {
			continue
		}
		if j+1 < len(rs) && rs[j+1] == q {
			j++
			continue
		}
		return j, nil
	}
	return 0, fmt.Errorf("unterminated %c quote", q)
}
