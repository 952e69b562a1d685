package kubelet

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata"
)

// privateIPv4Address is the VPC resource controller's resource on Windows
// nodes.
const privateIPv4Address = "vpc.amazonaws.com/PrivateIPv4Address"

// windowsBuilds are the builds of the Windows Server years the
// EKS-optimized Windows AMIs ship (what a Windows kubelet labels its node
// with as node.kubernetes.io/windows-build: major.minor.build).
var windowsBuilds = map[string]string{"2019": "10.0.17763", "2022": "10.0.20348", "2025": "10.0.26100"}

// host is the operating system a node's kubelet reports.
type host struct {
	os, image, kernel string
	windowsBuild      string // "" on Linux
}

// hostOS is the operating system of an instance: Windows when EC2 says the
// instance (or its image) is a Windows one, with the build of the image's
// Windows Server year; otherwise the Linux of its bootstrap format.
func hostOS(inst ec2types.Instance, img ec2types.Image, boot *userdata.Bootstrap) host {
	if inst.Platform != ec2types.PlatformValuesWindows && img.Platform != ec2types.PlatformValuesWindows {
		return host{os: "linux", image: linuxImage(boot.Format), kernel: "6.12.0-localcloud"}
	}
	year := ""
	for y := range windowsBuilds {
		if strings.Contains(aws.ToString(img.Name), "Windows_Server-"+y+"-") {
			year = y
		}
	}
	h := host{os: "windows", image: strings.Join(strings.Fields("Windows Server "+year+" Datacenter"), " "), windowsBuild: windowsBuilds[year]}
	h.kernel = h.windowsBuild
	if h.kernel == "" {
		h.kernel = "10.0"
	}
	return h
}

func linuxImage(f userdata.Format) string {
	switch f {
	case userdata.FormatAL2:
		return "Amazon Linux 2"
	case userdata.FormatBottlerocket:
		return "Bottlerocket OS 1.50.0 (aws-k8s)"
	}
	return "Amazon Linux 2023.9.20261101"
}
