package aws

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/wildcard"
)

// AMI variants of the EKS-optimized images, as Karpenter names them.
const (
	VariantStandard = "standard"
	VariantNvidia   = "nvidia"
	VariantNeuron   = "neuron"
)

// AMI is an image an EC2NodeClass selects.
type AMI struct {
	ID   string
	Name string
	// Architecture is the Kubernetes name: amd64 or arm64.
	Architecture string
	// Variants the image serves when it came from an alias (standard,
	// nvidia, neuron); nil for images selected by id/name/tags, which serve
	// every instance type of their architecture.
	Variants     []string
	CreationDate time.Time
	Deprecated   bool
}

// Compatible reports whether the image can boot instance type it.
func (a AMI) Compatible(it *catalog.InstanceType) bool {
	if a.Architecture != it.Architecture {
		return false
	}
	if a.Variants == nil {
		return true
	}
	return slices.Contains(a.Variants, variantOf(it))
}

func variantOf(it *catalog.InstanceType) string {
	for _, g := range it.GPUs {
		if strings.EqualFold(g.Manufacturer, "NVIDIA") {
			return VariantNvidia
		}
	}
	if it.NeuronDevices > 0 {
		return VariantNeuron
	}
	return VariantStandard
}

func kubeArch(ec2Arch string) string {
	switch ec2Arch {
	case "x86_64", "x86_64_mac":
		return "amd64"
	case "arm64", "arm64_mac":
		return "arm64"
	}
	return ec2Arch
}

// AliasParameter is one SSM public parameter an alias resolves through.
type AliasParameter struct {
	Path     string
	Arch     string // Kubernetes architecture
	Variants []string
}

// AliasParameters lists the SSM parameters Karpenter reads for an
// amiSelectorTerms alias (family@version) on Kubernetes k8sVersion.
func AliasParameters(alias, k8sVersion string) ([]AliasParameter, error) {
	family, version, ok := strings.Cut(alias, "@")
	if !ok || version == "" {
		return nil, fmt.Errorf("AMI alias %q: want family@version (e.g. al2023@latest)", alias)
	}
	latest := version == "latest"
	if !latest && !strings.HasPrefix(version, "v") {
		return nil, fmt.Errorf("AMI alias %q: version must be latest or v<release> (e.g. v20240807)", alias)
	}
	var out []AliasParameter
	switch family {
	case "al2023":
		for _, a := range []struct {
			ec2Arch  string
			variants []string
		}{{"x86_64", []string{VariantStandard, VariantNvidia, VariantNeuron}}, {"arm64", []string{VariantStandard, VariantNvidia}}} {
			for _, v := range a.variants {
				name := "recommended"
				if !latest {
					name = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", a.ec2Arch, v, k8sVersion, version)
				}
				out = append(out, AliasParameter{
					Path:     fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/%s/image_id", k8sVersion, a.ec2Arch, v, name),
					Arch:     kubeArch(a.ec2Arch),
					Variants: []string{v},
				})
			}
		}
	case "al2":
		for _, a := range []struct {
			dir, prefix, arch string
			variants          []string
		}{
			{"amazon-linux-2", "amazon-eks-node", "amd64", []string{VariantStandard}},
			{"amazon-linux-2-arm64", "amazon-eks-arm64-node", "arm64", []string{VariantStandard}},
			{"amazon-linux-2-gpu", "amazon-eks-gpu-node", "amd64", []string{VariantNvidia, VariantNeuron}},
		} {
			name := "recommended"
			if !latest {
				name = fmt.Sprintf("%s-%s-%s", a.prefix, k8sVersion, version)
			}
			out = append(out, AliasParameter{
				Path: fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s/%s/image_id", k8sVersion, a.dir, name),
				Arch: a.arch, Variants: a.variants,
			})
		}
	case "bottlerocket":
		// Bottlerocket versions carry a "v" on GitHub but not in SSM paths.
		v := strings.TrimPrefix(version, "v")
		for _, a := range []struct {
			flavor, ec2Arch string
			variants        []string
		}{
			{"", "x86_64", []string{VariantStandard, VariantNeuron}},
			{"", "arm64", []string{VariantStandard}},
			{"-nvidia", "x86_64", []string{VariantNvidia}},
			{"-nvidia", "arm64", []string{VariantNvidia}},
		} {
			out = append(out, AliasParameter{
				Path: fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/%s/image_id", k8sVersion, a.flavor, a.ec2Arch, v),
				Arch: kubeArch(a.ec2Arch), Variants: a.variants,
			})
		}
	case "windows2019", "windows2022", "windows2025":
		if !latest {
			return nil, fmt.Errorf("AMI alias %q: Windows aliases support only @latest", alias)
		}
		out = append(out, AliasParameter{
			Path:     fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", strings.TrimPrefix(family, "windows"), k8sVersion),
			Arch:     "amd64",
			Variants: []string{VariantStandard},
		})
	default:
		return nil, fmt.Errorf("AMI alias %q: unknown family %q (want al2023, al2, bottlerocket, windows2019, windows2022 or windows2025)", alias, family)
	}
	return out, nil
}

// AMIs resolves spec.amiSelectorTerms, newest image first, keeping only the
// newest image per architecture and variant set. Deprecated
// images are dropped unless nothing else matches (then they are used, as
// Karpenter does, so pinned AMIs keep working past their deprecation date).
func (p *Provider) AMIs(ctx context.Context, nc *apis.EC2NodeClass) ([]AMI, error) {
	terms := nc.Spec.AMISelectorTerms
	if len(terms) == 0 {
		return nil, fmt.Errorf("EC2NodeClass %s: %w: spec.amiSelectorTerms is empty", nc.Name, ErrNodeClassNotReady)
	}
	cluster, err := p.Cluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("EC2NodeClass %s: resolve AMIs: %w", nc.Name, err)
	}
	key := cluster.Version + "|" + selectorKey(terms)
	return p.amis.get(ctx, key, func(ctx context.Context) ([]AMI, error) {
		var found []AMI
		for i, term := range terms {
			var amis []AMI
			var err error
			switch {
			case term.Alias != "":
				amis, err = p.aliasAMIs(ctx, term.Alias, cluster.Version)
			case term.SSMParameter != "":
				amis, err = p.ssmParameterAMIs(ctx, term.SSMParameter)
			default:
				amis, err = p.selectorAMIs(ctx, term)
			}
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass %s: amiSelectorTerms[%d]: %w", nc.Name, i, err)
			}
			found = append(found, amis...)
		}
		found = dedupAMIs(found)
		live := slices.DeleteFunc(slices.Clone(found), func(a AMI) bool { return a.Deprecated })
		if len(live) > 0 {
			found = live
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("EC2NodeClass %s: %w: no AMI matches spec.amiSelectorTerms", nc.Name, ErrNodeClassNotReady)
		}
		sort.SliceStable(found, func(i, j int) bool {
			if !found[i].CreationDate.Equal(found[j].CreationDate) {
				return found[i].CreationDate.After(found[j].CreationDate)
			}
			return found[i].ID < found[j].ID
		})
		return newestPerKind(found), nil
	})
}

// newestPerKind keeps, of images serving the same architecture and
// variants, only the newest (amis are newest first): Karpenter launches the
// newest matching image, and nodes on an older one are drifted.
func newestPerKind(amis []AMI) []AMI {
	seen := map[string]bool{}
	out := amis[:0:0]
	for _, a := range amis {
		v := slices.Clone(a.Variants)
		slices.Sort(v)
		key := a.Architecture + "|" + strings.Join(v, ",")
		if a.Variants == nil {
			key += "|any"
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, a)
	}
	return out
}

func dedupAMIs(in []AMI) []AMI {
	byID := map[string]int{}
	var out []AMI
	for _, a := range in {
		if i, ok := byID[a.ID]; ok {
			// The same image behind two alias parameters serves both variants.
			if out[i].Variants != nil && a.Variants != nil {
				for _, v := range a.Variants {
					if !slices.Contains(out[i].Variants, v) {
						out[i].Variants = append(out[i].Variants, v)
					}
				}
			} else {
				out[i].Variants = nil
			}
			continue
		}
		byID[a.ID] = len(out)
		out = append(out, a)
	}
	return out
}

func (p *Provider) aliasAMIs(ctx context.Context, alias, k8sVersion string) ([]AMI, error) {
	if p.clients.SSM == nil {
		return nil, fmt.Errorf("alias %s: no SSM client", alias)
	}
	params, err := AliasParameters(alias, k8sVersion)
	if err != nil {
		return nil, err
	}
	byImage := map[string]AliasParameter{}
	var ids []string
	var lastErr error
	for _, prm := range params {
		out, err := p.clients.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: sdkaws.String(prm.Path)})
		if err != nil {
			// Not every variant exists for every version (e.g. no arm64 nvidia
			// AL2023 image for older Kubernetes); other errors are remembered.
			if !isNotFound(err) {
				lastErr = fmt.Errorf("get SSM parameter %s: %w", prm.Path, err)
			}
			continue
		}
		id := sdkaws.ToString(out.Parameter.Value)
		if id == "" {
			continue
		}
		if prev, ok := byImage[id]; ok {
			prev.Variants = append(slices.Clone(prev.Variants), prm.Variants...)
			byImage[id] = prev
			continue
		}
		byImage[id] = prm
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		if lastErr != nil {
			return nil, fmt.Errorf("alias %s on Kubernetes %s: %w", alias, k8sVersion, lastErr)
		}
		return nil, fmt.Errorf("alias %s: no SSM parameter found for Kubernetes %s", alias, k8sVersion)
	}
	images, err := p.describeImages(ctx, &ec2.DescribeImagesInput{ImageIds: ids})
	if err != nil {
		return nil, fmt.Errorf("alias %s: %w", alias, err)
	}
	out := make([]AMI, 0, len(images))
	for _, img := range images {
		prm, ok := byImage[img.ID]
		if !ok {
			continue
		}
		img.Variants = prm.Variants
		if img.Architecture == "" {
			img.Architecture = prm.Arch
		}
		out = append(out, img)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("alias %s: SSM names images %v but DescribeImages returns none of them", alias, ids)
	}
	return out, nil
}

// ssmParameterAMIs resolves an amiSelectorTerms ssmParameter: the
// parameter (name or ARN) holds one image id. Its architecture comes from
// the image; it serves every variant, as an id term does.
func (p *Provider) ssmParameterAMIs(ctx context.Context, name string) ([]AMI, error) {
	if p.clients.SSM == nil {
		return nil, fmt.Errorf("ssmParameter %s: no SSM client", name)
	}
	out, err := p.clients.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: sdkaws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("ssmParameter %s: %w", name, err)
	}
	id := sdkaws.ToString(out.Parameter.Value)
	if !strings.HasPrefix(id, "ami-") {
		return nil, fmt.Errorf("ssmParameter %s: value %q is not an AMI id", name, id)
	}
	images, err := p.describeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil {
		return nil, fmt.Errorf("ssmParameter %s: %w", name, err)
	}
	return images, nil
}

func (p *Provider) selectorAMIs(ctx context.Context, term apis.AMISelectorTerm) ([]AMI, error) {
	in := &ec2.DescribeImagesInput{Filters: tagFilters(term.Tags)}
	if term.ID != "" {
		in.ImageIds = []string{term.ID}
	}
	if term.Name != "" {
		in.Filters = append(in.Filters, ec2types.Filter{Name: sdkaws.String("name"), Values: []string{term.Name}})
	}
	switch {
	case term.Owner != "":
		in.Owners = []string{term.Owner}
	case term.Name != "" && term.ID == "":
		// A bare name could match anyone's public image; Karpenter defaults to these owners.
		in.Owners = []string{"self", "amazon"}
	}
	images, err := p.describeImages(ctx, in)
	if err != nil {
		return nil, err
	}
	var out []AMI
	for _, img := range images {
		if (term.ID != "" && img.ID != term.ID) || (term.Name != "" && !globMatch(term.Name, img.Name)) {
			continue
		}
		out = append(out, img)
	}
	return out, nil
}

// describeImages pages DescribeImages and keeps available images whose tags
// match; deprecation is judged against the provider clock.
func (p *Provider) describeImages(ctx context.Context, in *ec2.DescribeImagesInput) ([]AMI, error) {
	var out []AMI
	// Deprecated images are listed and judged here, so that they are used
	// when nothing newer matches rather than making the class unresolvable.
	in.IncludeDeprecated = sdkaws.Bool(true)
	pager := ec2.NewDescribeImagesPaginator(p.clients.EC2, in)
	now := p.opts.Now()
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe images: %w", err)
		}
		for _, img := range page.Images {
			if img.State != "" && img.State != ec2types.ImageStateAvailable {
				continue
			}
			a := AMI{
				ID: sdkaws.ToString(img.ImageId), Name: sdkaws.ToString(img.Name),
				Architecture: kubeArch(string(img.Architecture)),
			}
			if t, err := time.Parse(time.RFC3339, sdkaws.ToString(img.CreationDate)); err == nil {
				a.CreationDate = t
			}
			if d := sdkaws.ToString(img.DeprecationTime); d != "" {
				if t, err := time.Parse(time.RFC3339, d); err == nil && !now.Before(t) {
					a.Deprecated = true
				}
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// globMatch matches EC2-filter style wildcards (* and ?) anchored at both ends.
func globMatch(pattern, s string) bool { return wildcard.Match(pattern, s) }

// pickAMI returns the newest image compatible with it (amis are newest first).
func pickAMI(amis []AMI, it *catalog.InstanceType) (AMI, bool) {
	for _, a := range amis {
		if a.Compatible(it) {
			return a, true
		}
	}
	return AMI{}, false
}
