package ec2sim

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// windowsVersions are the Windows Server years of the EKS-optimized Windows
// AMI families.
var windowsVersions = map[string]string{
	FamilyWindows2019: "2019", FamilyWindows2022: "2022", FamilyWindows2025: "2025",
}

// publishWindowsLocked releases the EKS-optimized Windows Server Core image
// of family for the cluster's Kubernetes version and points its public SSM
// parameter at it: /aws/service/ami-windows-latest/Windows_Server-<year>-
// English-Core-EKS_Optimized-<k8s>/image_id (the path Karpenter-AWS
// amifamily/windows.go resolves; AWS publishes no pinned versions of it).
// The images are x86_64 only, as AWS publishes them; Windows Server 2025
// images exist from Kubernetes 1.35 on (Karpenter-AWS amifamily/ami.go),
// so older clusters get none. Ids come from the name, not the seeded
// random source, so adding these images moves no other id.
func (c *Cloud) publishWindowsLocked(family string) []types.Image {
	year := windowsVersions[family]
	ver := c.cfg.KubernetesVersion
	if family == FamilyWindows2025 && !atLeastMinor(ver, 35) {
		return nil
	}
	c.releases[family]++
	release := firstRelease.AddDate(0, 0, 7*(c.releases[family]-1))
	base := fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s", year, ver)
	name := base + "-" + release.Format("2006.01.02")
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	img := c.addImageLocked(types.Image{
		ImageId:      aws.String(fmt.Sprintf("ami-%017x", h.Sum64()&0xfffffffffffffff)),
		Name:         aws.String(name),
		Description:  aws.String(fmt.Sprintf("Microsoft Windows Server %s Core optimized for EKS and Kubernetes %s", year, ver)),
		Architecture: types.ArchitectureValuesX8664,
		OwnerId:      aws.String(windowsAMIOwner), ImageOwnerAlias: aws.String("amazon"), Public: aws.Bool(true),
		CreationDate: aws.String(release.Format("2006-01-02T15:04:05.000Z")),
	})
	// What DescribeImages says of a Windows image: its platform, the
	// Windows usage operation, and a 50 GiB root volume on /dev/sda1.
	stored := c.imageByID(*img.ImageId)
	stored.Platform = types.PlatformValuesWindows
	stored.PlatformDetails = aws.String("Windows")
	stored.UsageOperation = aws.String("RunInstances:0002")
	stored.RootDeviceName = aws.String("/dev/sda1")
	stored.BlockDeviceMappings = []types.BlockDeviceMapping{{DeviceName: aws.String("/dev/sda1"),
		Ebs: &types.EbsBlockDevice{VolumeSize: aws.Int32(50), VolumeType: types.VolumeTypeGp3, DeleteOnTermination: aws.Bool(true)}}}
	c.ssm["/aws/service/ami-windows-latest/"+base+"/image_id"] = *stored.ImageId
	return []types.Image{*stored}
}

// atLeastMinor reports whether a "1.N" Kubernetes version has N >= minor.
func atLeastMinor(version string, minor int) bool {
	_, m, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(m)
	return err == nil && n >= minor
}
