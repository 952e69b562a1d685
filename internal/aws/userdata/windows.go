package userdata

import (
	"fmt"
	"strings"
)

// windows renders a PowerShell block: the EC2NodeClass's script first, then
// the EKS-optimized AMI's Start-EKSBootstrap.ps1.
func windows(o Options) string {
	var b strings.Builder
	b.WriteString("<powershell>\n")
	if custom := strings.TrimSpace(stripPowershellTags(o.Custom)); custom != "" {
		b.WriteString(custom)
		b.WriteString("\n")
	}
	b.WriteString(`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n")
	fmt.Fprintf(&b, "& $EKSBootstrapScriptFile -EKSClusterName %s -APIServerEndpoint %s -Base64ClusterCA %s",
		psQuote(o.ClusterName), psQuote(o.ClusterEndpoint), psQuote(o.CABundle))
	if args := o.kubeletExtraArgs(); len(args) > 0 {
		fmt.Fprintf(&b, " -KubeletExtraArgs %s", psQuote(strings.Join(args, " ")))
	}
	if len(o.Kubelet.ClusterDNS) > 0 {
		fmt.Fprintf(&b, " -DNSClusterIP %s", psQuote(o.Kubelet.ClusterDNS[0]))
	}
	b.WriteString("\n</powershell>\n")
	return b.String()
}

// stripPowershellTags removes the user's own <powershell> wrapper so the
// merged script has exactly one.
func stripPowershellTags(s string) string {
	s = strings.ReplaceAll(s, "<powershell>", "")
	return strings.ReplaceAll(s, "</powershell>", "")
}
