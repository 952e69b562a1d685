package ec2sim

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// AMI families published by the simulated region, as Karpenter names them.
const (
	FamilyAL2023       = "al2023"
	FamilyAL2          = "al2"
	FamilyBottlerocket = "bottlerocket"
	FamilyWindows2019  = "windows2019"
	FamilyWindows2022  = "windows2022"
	FamilyWindows2025  = "windows2025"
)

// Account ids that own the public EKS-optimized AMIs.
const (
	eksAMIOwner          = "602401143452"
	bottlerocketAMIOwner = "092701018921"
	windowsAMIOwner      = "801119661308" // "amazon", the Windows Server AMIs' owner
)

type amiVariant struct {
	family, arch, variant string // variant: standard, nvidia
}

var amiVariants = []amiVariant{
	{FamilyAL2023, "x86_64", "standard"}, {FamilyAL2023, "arm64", "standard"}, {FamilyAL2023, "x86_64", "nvidia"},
	{FamilyAL2, "x86_64", "standard"}, {FamilyAL2, "arm64", "standard"}, {FamilyAL2, "x86_64", "nvidia"},
	{FamilyBottlerocket, "x86_64", "standard"}, {FamilyBottlerocket, "arm64", "standard"}, {FamilyBottlerocket, "x86_64", "nvidia"},
}

// firstRelease is the release date of the seeded AMIs; each PublishAMI adds a week.
var firstRelease = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func (c *Cloud) seedImages() {
	for _, fam := range []string{FamilyAL2023, FamilyAL2, FamilyBottlerocket} {
		c.publishLocked(fam)
	}
	for _, fam := range []string{FamilyWindows2019, FamilyWindows2022, FamilyWindows2025} {
		c.publishWindowsLocked(fam)
	}
}

// PublishAMI releases a new version of every image of family (al2023, al2,
// bottlerocket, windows2019, windows2022, windows2025) for the cluster's Kubernetes version and points the SSM
// "recommended"/"latest" parameters at it, as an EKS AMI release does.
func (c *Cloud) PublishAMI(family string) ([]types.Image, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch family {
	case FamilyAL2023, FamilyAL2, FamilyBottlerocket:
	case FamilyWindows2019, FamilyWindows2022, FamilyWindows2025:
		return c.publishWindowsLocked(family), nil
	default:
		return nil, fmt.Errorf("publish ami: unknown family %q (want al2023, al2, bottlerocket or windows2019/2022/2025)", family)
	}
	return c.publishLocked(family), nil
}

func (c *Cloud) publishLocked(family string) []types.Image {
	c.releases[family]++
	n := c.releases[family] - 1
	release := firstRelease.AddDate(0, 0, 7*n) // weekly releases
	date := release.Format("20060102")
	brVersion := fmt.Sprintf("1.%d.0", 50+n)
	ver := c.cfg.KubernetesVersion
	var out []types.Image
	for _, v := range amiVariants {
		if v.family != family {
			continue
		}
		var name, owner string
		var params []string
		switch family {
		case FamilyAL2023:
			name = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-v%s", v.arch, v.variant, ver, date)
			owner = eksAMIOwner
			base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/", ver, v.arch, v.variant)
			params = []string{base + "recommended/image_id", base + name + "/image_id"}
		case FamilyAL2:
			prefix, suffix := "amazon-eks-node", ""
			switch {
			case v.variant == "nvidia":
				prefix, suffix = "amazon-eks-gpu-node", "-gpu"
			case v.arch == "arm64":
				prefix, suffix = "amazon-eks-arm64-node", "-arm64"
			}
			name = fmt.Sprintf("%s-%s-v%s", prefix, ver, date)
			owner = eksAMIOwner
			base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2%s/", ver, suffix)
			params = []string{base + "recommended/image_id", base + name + "/image_id"}
		case FamilyBottlerocket:
			flavor := ""
			if v.variant == "nvidia" {
				flavor = "-nvidia"
			}
			name = fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-v%s-%08x", ver, flavor, v.arch, brVersion, c.rng.Uint32())
			owner = bottlerocketAMIOwner
			base := fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/", ver, flavor, v.arch)
			params = []string{base + "latest/image_id", base + brVersion + "/image_id"}
		}
		img := c.addImageLocked(types.Image{
			Name:         aws.String(name),
			Description:  aws.String(fmt.Sprintf("EKS-optimized Kubernetes %s node (%s, %s, %s)", ver, family, v.arch, v.variant)),
			Architecture: types.ArchitectureValues(v.arch),
			OwnerId:      aws.String(owner), ImageOwnerAlias: aws.String("amazon"), Public: aws.Bool(true),
			CreationDate: aws.String(release.Format("2006-01-02T15:04:05.000Z")),
		})
		for _, p := range params {
			c.ssm[p] = *img.ImageId
		}
		out = append(out, img)
	}
	return out
}

// AddImage registers an image (e.g. a custom AMI owned by the account) and returns it with its id.
func (c *Cloud) AddImage(img types.Image) types.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	if img.OwnerId == nil {
		img.OwnerId = aws.String(c.cfg.Account)
	}
	if img.Public == nil {
		img.Public = aws.Bool(false)
	}
	return c.addImageLocked(img)
}

func (c *Cloud) addImageLocked(img types.Image) types.Image {
	if img.ImageId == nil {
		img.ImageId = aws.String(c.newID("ami"))
	}
	if img.Architecture == "" {
		img.Architecture = types.ArchitectureValuesX8664
	}
	if img.CreationDate == nil {
		img.CreationDate = aws.String(c.cfg.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	img.State = types.ImageStateAvailable
	img.ImageType = types.ImageTypeValuesMachine
	img.RootDeviceName = aws.String("/dev/xvda")
	img.RootDeviceType = types.DeviceTypeEbs
	img.VirtualizationType = types.VirtualizationTypeHvm
	img.Hypervisor = types.HypervisorTypeXen
	img.EnaSupport = aws.Bool(true)
	img.PlatformDetails = aws.String("Linux/UNIX")
	img.UsageOperation = aws.String("RunInstances")
	img.BlockDeviceMappings = []types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"),
		Ebs: &types.EbsBlockDevice{VolumeSize: aws.Int32(20), VolumeType: types.VolumeTypeGp3, DeleteOnTermination: aws.Bool(true)}}}
	c.images = append(c.images, &img)
	return img
}

// DeprecateImage sets an image's deprecation time.
func (c *Cloud) DeprecateImage(id string, at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, img := range c.images {
		if *img.ImageId == id {
			img.DeprecationTime = aws.String(at.UTC().Format("2006-01-02T15:04:05.000Z"))
			return nil
		}
	}
	return fmt.Errorf("deprecate image: %s not found", id)
}

// SSMParameter returns the value of a public SSM parameter the region publishes.
func (c *Cloud) SSMParameter(name string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.ssm[name]
	return v, ok
}

// Image returns the image with id as DescribeImages describes it.
func (c *Cloud) Image(id string) (types.Image, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if img := c.imageByID(id); img != nil {
		return *img, true
	}
	return types.Image{}, false
}

func (c *Cloud) imageByID(id string) *types.Image {
	for _, img := range c.images {
		if *img.ImageId == id {
			return img
		}
	}
	return nil
}
