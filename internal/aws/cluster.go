package aws

import (
	"context"
	"fmt"
	"net/netip"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// ClusterInfo is what node bootstrap needs to know about the EKS cluster.
type ClusterInfo struct {
	Name     string
	Endpoint string
	// CABundle is the base64 PEM certificate authority as EKS returns it.
	CABundle string
	// Version is the Kubernetes minor version, e.g. "1.33".
	Version string
	// ServiceCIDR is the Kubernetes service CIDR (IPv6 when IPFamily is ipv6).
	ServiceCIDR string
	IPFamily    string // ipv4 | ipv6
}

// DNSIP is the cluster DNS service address EKS AMIs default to: the tenth
// address of the IPv4 service CIDR, or ::a in an IPv6 one.
func (c ClusterInfo) DNSIP() (string, error) {
	pfx, err := netip.ParsePrefix(c.ServiceCIDR)
	if err != nil {
		return "", fmt.Errorf("cluster %s: service CIDR %q: %w", c.Name, c.ServiceCIDR, err)
	}
	a := pfx.Masked().Addr().As16()
	a[15] += 10
	addr := netip.AddrFrom16(a)
	if pfx.Addr().Is4() {
		addr = addr.Unmap()
	}
	return addr.String(), nil
}

// Cluster returns the cluster's endpoint, CA, version and service CIDR
// (EKS DescribeCluster, cached for the discovery TTL).
func (p *Provider) Cluster(ctx context.Context) (ClusterInfo, error) {
	return p.cluster.get(ctx, "cluster", func(ctx context.Context) (ClusterInfo, error) {
		if p.clients.EKS == nil {
			return ClusterInfo{}, fmt.Errorf("describe cluster %s: no EKS client", p.opts.ClusterName)
		}
		out, err := p.clients.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: sdkaws.String(p.opts.ClusterName)})
		if err != nil {
			return ClusterInfo{}, fmt.Errorf("describe cluster %s: %w", p.opts.ClusterName, err)
		}
		return clusterInfo(p.opts.ClusterName, out.Cluster)
	})
}

func clusterInfo(name string, c *ekstypes.Cluster) (ClusterInfo, error) {
	if c == nil {
		return ClusterInfo{}, fmt.Errorf("describe cluster %s: empty response", name)
	}
	info := ClusterInfo{
		Name:     name,
		Endpoint: sdkaws.ToString(c.Endpoint),
		Version:  sdkaws.ToString(c.Version),
		IPFamily: "ipv4",
	}
	if c.CertificateAuthority != nil {
		info.CABundle = sdkaws.ToString(c.CertificateAuthority.Data)
	}
	if n := c.KubernetesNetworkConfig; n != nil {
		if n.IpFamily == ekstypes.IpFamilyIpv6 {
			info.IPFamily = "ipv6"
			info.ServiceCIDR = sdkaws.ToString(n.ServiceIpv6Cidr)
		} else {
			info.ServiceCIDR = sdkaws.ToString(n.ServiceIpv4Cidr)
		}
	}
	var missing []string
	for field, v := range map[string]string{"endpoint": info.Endpoint, "certificateAuthority": info.CABundle, "version": info.Version, "service CIDR": info.ServiceCIDR} {
		if v == "" {
			missing = append(missing, field)
		}
	}
	if len(missing) > 0 {
		return ClusterInfo{}, fmt.Errorf("describe cluster %s: response lacks %v (is the cluster ACTIVE?)", name, missing)
	}
	return info, nil
}
