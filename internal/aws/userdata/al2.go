package userdata

import (
	"fmt"
	"strings"
)

// eksBootstrap renders AL2 user data: the EC2NodeClass's parts first (they run
// before the node joins), then a shell part calling /etc/eks/bootstrap.sh.
func eksBootstrap(o Options) (string, error) {
	parts, err := customParts(o.Custom, false)
	if err != nil {
		return "", fmt.Errorf("AL2 user data: %w", err)
	}
	parts = append(parts, Part{ContentType: ContentTypeShell, Content: o.bootstrapScript()})
	return SerializeMIME(parts)
}

func (o Options) bootstrapScript() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash -xe\n")
	b.WriteString("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	// bootstrap.sh does not accept --flag=value, so every value is a separate word.
	fmt.Fprintf(&b, "/etc/eks/bootstrap.sh %s --apiserver-endpoint %s --b64-cluster-ca %s",
		shellQuote(o.ClusterName), shellQuote(o.ClusterEndpoint), shellQuote(o.CABundle))
	if o.isIPv6() {
		b.WriteString(" \\\n--ip-family ipv6")
	}
	if len(o.Kubelet.ClusterDNS) > 0 {
		fmt.Fprintf(&b, " \\\n--dns-cluster-ip %s", shellQuote(o.Kubelet.ClusterDNS[0]))
	}
	if o.Kubelet.MaxPods != nil {
		// Without this bootstrap.sh would compute its own ENI-based max pods.
		b.WriteString(" \\\n--use-max-pods false")
	}
	if args := o.kubeletExtraArgs(); len(args) > 0 {
		fmt.Fprintf(&b, " \\\n--kubelet-extra-args %s", shellQuote(strings.Join(args, " ")))
	}
	if o.InstanceStorePolicy == "RAID0" {
		b.WriteString(" \\\n--local-disks raid0")
	}
	b.WriteString("\n")
	return b.String()
}
