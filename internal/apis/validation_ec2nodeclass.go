package apis

import (
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// EC2NodeClass rules, mirroring karpenter.k8s.aws/v1's OpenAPI and CEL
// rules (see validation.go).

var (
	subnetIDPattern = regexp.MustCompile(`^subnet-[0-9a-z]+$`)
	sgIDPattern     = regexp.MustCompile(`^sg-[0-9a-z]+$`)
	amiIDPattern    = regexp.MustCompile(`^ami-[0-9a-z]+$`)
	aliasPattern    = regexp.MustCompile(`^[a-zA-Z0-9]+@.+$`)
	datedVersion    = regexp.MustCompile(`^v[0-9]{8}$`)
	semverVersion   = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+$`)
	volumeSizeRe    = regexp.MustCompile(`^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$`)
	amiFamilies     = []string{AMIFamilyAL2, AMIFamilyAL2023, AMIFamilyBottlerocket, AMIFamilyCustom, AMIFamilyWindows2019, AMIFamilyWindows2022, AMIFamilyWindows2025}
	volumeTypes     = []string{"standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"}
	evictionSignals = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available"}
	reservedKeys    = []string{"cpu", "memory", "ephemeral-storage", "pid"}
)

func validateEC2NodeClass(nc *EC2NodeClass) []fieldErr {
	v := &validator{}
	validateName(v, nc.Name)
	s := &nc.Spec

	validateSubnetTerms(v, s.SubnetSelectorTerms)
	validateSGTerms(v, s.SecurityGroupSelectorTerms)
	validateAMI(v, s)

	switch {
	case s.Role != "" && s.InstanceProfile != nil:
		v.add("spec", "must specify exactly one of ['role', 'instanceProfile']")
	case s.Role == "" && s.InstanceProfile == nil:
		v.add("spec", "must specify exactly one of ['role', 'instanceProfile']")
	case s.InstanceProfile != nil && *s.InstanceProfile == "":
		v.add("spec.instanceProfile", "instanceProfile cannot be empty")
	}

	for _, k := range sortedKeys(s.Tags) {
		p := joinKey("spec.tags", k)
		switch {
		case k == "":
			v.add(p, "empty tag keys aren't supported")
		case k == "eks:eks-cluster-name":
			v.add(p, "tag contains a restricted tag matching eks:eks-cluster-name")
		case strings.HasPrefix(k, "kubernetes.io/cluster"):
			v.add(p, "tag contains a restricted tag matching kubernetes.io/cluster/")
		case k == NodePoolLabelKey:
			v.add(p, "tag contains a restricted tag matching karpenter.sh/nodepool")
		case k == "karpenter.sh/nodeclaim":
			v.add(p, "tag contains a restricted tag matching karpenter.sh/nodeclaim")
		case k == NodeClassLabelKey:
			v.add(p, "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass")
		case strings.HasPrefix(k, "nodewright.io/"):
			// nodewright's ownership tags decide what it may terminate.
			v.add(p, "tag contains a restricted tag matching nodewright.io/")
		}
	}

	validateEC2Limits(v, s)

	if s.Kubelet != nil {
		validateKubelet(v, "spec.kubelet", s.Kubelet)
	}
	validateBlockDevices(v, s.BlockDeviceMappings)
	validateNetworking(v, s)
	if m := s.MetadataOptions; m != nil {
		if m.HTTPEndpoint != nil {
			v.oneOf("spec.metadataOptions.httpEndpoint", *m.HTTPEndpoint, "enabled", "disabled")
		}
		if m.HTTPProtocolIPv6 != nil {
			v.oneOf("spec.metadataOptions.httpProtocolIPv6", *m.HTTPProtocolIPv6, "enabled", "disabled")
		}
		if h := m.HTTPPutResponseHopLimit; h != nil && (*h < 1 || *h > 64) {
			v.add("spec.metadataOptions.httpPutResponseHopLimit", "%d is outside 1..64", *h)
		}
		if m.HTTPTokens != nil {
			v.oneOf("spec.metadataOptions.httpTokens", *m.HTTPTokens, "required", "optional")
		}
	}
	if p := s.InstanceStorePolicy; p != nil {
		v.oneOf("spec.instanceStorePolicy", string(*p), string(InstanceStorePolicyRAID0))
	}
	return v.errs
}

func validateSelectorTags(v *validator, path string, tags map[string]string) {
	if len(tags) > 20 {
		v.add(path, "%d tags, at most 20 are allowed", len(tags))
	}
	for _, k := range sortedKeys(tags) {
		if k == "" || tags[k] == "" {
			v.add(path, "empty tag keys or values aren't supported")
			return
		}
	}
}

// validateTermCount checks a required list of at most 30 selector terms.
func validateTermCount(v *validator, path, field string, isNil bool, n int) {
	switch {
	case isNil:
		v.add(path, msgRequired)
	case n == 0:
		v.add(path, "%s cannot be empty", field)
	case n > 30:
		v.add(path, "%d terms, at most 30 are allowed", n)
	}
}

// validateTermTagsAndID checks a selector term's tags (when set, at least
// one) and its id against the resource's id pattern.
func validateTermTagsAndID(v *validator, p string, tags map[string]string, id string, idPattern *regexp.Regexp, idMsg string) {
	if tags != nil {
		if len(tags) == 0 {
			v.add(joinField(p, "tags"), "expected at least one tag")
		}
		validateSelectorTags(v, joinField(p, "tags"), tags)
	}
	if id != "" && !idPattern.MatchString(id) {
		v.add(joinField(p, "id"), idMsg, id)
	}
}

func validateSubnetTerms(v *validator, terms []SubnetSelectorTerm) {
	const path = "spec.subnetSelectorTerms"
	validateTermCount(v, path, "subnetSelectorTerms", terms == nil, len(terms))
	for i, t := range terms {
		p := joinIndex(path, i)
		switch {
		case t.Tags == nil && t.ID == "":
			v.add(p, "expected at least one, got none, ['tags', 'id']")
		case t.Tags != nil && t.ID != "":
			v.add(p, "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term")
		}
		validateTermTagsAndID(v, p, t.Tags, t.ID, subnetIDPattern, "%q is not a subnet id (subnet-...)")
	}
}

func validateSGTerms(v *validator, terms []SecurityGroupSelectorTerm) {
	const path = "spec.securityGroupSelectorTerms"
	validateTermCount(v, path, "securityGroupSelectorTerms", terms == nil, len(terms))
	for i, t := range terms {
		p := joinIndex(path, i)
		switch {
		case t.Tags == nil && t.ID == "" && t.Name == "":
			v.add(p, "expected at least one, got none, ['tags', 'id', 'name']")
		case t.ID != "" && (t.Tags != nil || t.Name != ""):
			v.add(p, "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term")
		case t.Name != "" && t.Tags != nil:
			v.add(p, "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term")
		}
		validateTermTagsAndID(v, p, t.Tags, t.ID, sgIDPattern, "%q is not a security group id (sg-...)")
	}
}

func validateAMI(v *validator, s *EC2NodeClassSpec) {
	const path = "spec.amiSelectorTerms"
	terms := s.AMISelectorTerms
	switch {
	case len(terms) == 0:
		v.add(path, "%s (e.g. [{alias: al2023@latest}])", msgRequired)
	case len(terms) > 30:
		v.add(path, "%d terms, at most 30 are allowed", len(terms))
	}
	aliasFamily := ""
	for i, t := range terms {
		p := joinIndex(path, i)
		others := t.Tags != nil || t.Name != "" || t.Owner != ""
		switch {
		case t.Alias == "" && t.ID == "" && t.Tags == nil && t.Name == "" && t.SSMParameter == "":
			v.add(p, "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']")
		case t.ID != "" && (t.Alias != "" || others):
			v.add(p, "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms")
		case t.Alias != "" && (t.ID != "" || others):
			v.add(p, "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms")
		}
		if t.Tags != nil {
			validateSelectorTags(v, joinField(p, "tags"), t.Tags)
		}
		if t.ID != "" && !amiIDPattern.MatchString(t.ID) {
			v.add(joinField(p, "id"), "%q is not an AMI id (ami-...)", t.ID)
		}
		if t.Alias != "" {
			if fam, ok := validateAlias(v, joinField(p, "alias"), t.Alias); ok {
				aliasFamily = fam
			}
			if len(terms) != 1 {
				v.add(path, "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms")
			}
		}
	}
	hasAlias := slices.ContainsFunc(terms, func(t AMISelectorTerm) bool { return t.Alias != "" })
	switch {
	case s.AMIFamily != nil:
		fam := *s.AMIFamily
		if fam == amiFamilyUbuntuBeta {
			v.add("spec.amiFamily", "Ubuntu is not an AMI family in karpenter.k8s.aws/v1: use AL2 with amiSelectorTerms for your Ubuntu AMIs")
			break
		}
		v.oneOf("spec.amiFamily", fam, amiFamilies...)
		if aliasFamily != "" && fam != AMIFamilyCustom && fam != aliasFamily {
			v.add("spec.amiFamily", "if set, amiFamily must be '%s' or 'Custom' when using an %s alias", aliasFamily, aliasFamily)
		}
	case !hasAlias && len(terms) > 0:
		v.add("spec.amiFamily", "must specify amiFamily if amiSelectorTerms does not contain an alias")
	}
}

// validateAlias checks "family@version" and returns the AMI family.
func validateAlias(v *validator, path, alias string) (string, bool) {
	if len(alias) > 30 {
		v.add(path, "%q is longer than 30 characters", alias)
		return "", false
	}
	if !aliasPattern.MatchString(alias) {
		v.add(path, "'alias' is improperly formatted, must match the format 'family@version'")
		return "", false
	}
	famName, version, _ := strings.Cut(alias, "@")
	fam, ok := aliasFamilies[famName]
	if !ok {
		v.add(path, "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'")
		return "", false
	}
	if version == "latest" {
		return fam, true
	}
	switch famName {
	case "windows2019", "windows2022", "windows2025":
		v.add(path, "windows families may only specify version 'latest'")
	case "bottlerocket":
		if !semverVersion.MatchString(version) {
			v.add(path, "version %q of %q is not \"latest\" or a Bottlerocket release like v1.20.3", version, alias)
		}
	default:
		if !datedVersion.MatchString(version) {
			v.add(path, "version %q of %q is not \"latest\" or a release like v20240625", version, alias)
		}
	}
	return fam, true
}

func validateKubelet(v *validator, path string, k *KubeletConfiguration) {
	for i, ip := range k.ClusterDNS {
		if net.ParseIP(ip) == nil {
			v.add(joinIndex(joinField(path, "clusterDNS"), i), "%q is not an IP address", ip)
		}
	}
	if k.MaxPods != nil && *k.MaxPods < 0 {
		v.add(joinField(path, "maxPods"), "%d must not be negative", *k.MaxPods)
	}
	if k.PodsPerCore != nil && *k.PodsPerCore < 0 {
		v.add(joinField(path, "podsPerCore"), "%d must not be negative", *k.PodsPerCore)
	}
	validateReserved(v, joinField(path, "systemReserved"), "systemReserved", k.SystemReserved)
	validateReserved(v, joinField(path, "kubeReserved"), "kubeReserved", k.KubeReserved)
	validateEviction(v, joinField(path, "evictionHard"), "evictionHard", k.EvictionHard)
	validateEviction(v, joinField(path, "evictionSoft"), "evictionSoft", k.EvictionSoft)
	for _, sig := range sortedKeys(k.EvictionSoftGracePeriod) {
		p := joinKey(joinField(path, "evictionSoftGracePeriod"), sig)
		if !slices.Contains(evictionSignals, sig) {
			v.add(p, "valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']")
		}
		if d := k.EvictionSoftGracePeriod[sig].Duration; d < 0 {
			v.add(p, "%s must not be negative", d)
		}
		if _, ok := k.EvictionSoft[sig]; !ok {
			v.add(p, "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft")
		}
	}
	for _, sig := range sortedKeys(k.EvictionSoft) {
		if _, ok := k.EvictionSoftGracePeriod[sig]; !ok {
			v.add(joinKey(joinField(path, "evictionSoft"), sig), "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod")
		}
	}
	if k.EvictionMaxPodGracePeriod != nil && *k.EvictionMaxPodGracePeriod < 0 {
		v.add(joinField(path, "evictionMaxPodGracePeriod"), "%d must not be negative", *k.EvictionMaxPodGracePeriod)
	}
	hi, lo := k.ImageGCHighThresholdPercent, k.ImageGCLowThresholdPercent
	if hi != nil && (*hi < 0 || *hi > 100) {
		v.add(joinField(path, "imageGCHighThresholdPercent"), "%d is outside 0..100", *hi)
	}
	if lo != nil && (*lo < 0 || *lo > 100) {
		v.add(joinField(path, "imageGCLowThresholdPercent"), "%d is outside 0..100", *lo)
	}
	if hi != nil && lo != nil && *hi <= *lo {
		v.add(path, "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent")
	}
}

func validateReserved(v *validator, path, field string, m map[string]string) {
	for _, k := range sortedKeys(m) {
		p := joinKey(path, k)
		if !slices.Contains(reservedKeys, k) {
			v.add(p, "valid keys for %s are ['cpu','memory','ephemeral-storage','pid']", field)
			continue
		}
		q, err := resource.ParseQuantity(m[k])
		switch {
		case strings.HasPrefix(m[k], "-") || (err == nil && q.Sign() < 0):
			v.add(p, "%s value cannot be a negative resource quantity", field)
		case err != nil:
			v.add(p, "%q is not a quantity (e.g. 100m, 1Gi)", m[k])
		}
	}
}

func validateEviction(v *validator, path, field string, m map[string]string) {
	for _, k := range sortedKeys(m) {
		p := joinKey(path, k)
		if !slices.Contains(evictionSignals, k) {
			v.add(p, "valid keys for %s are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']", field)
			continue
		}
		val := m[k]
		if pct, ok := strings.CutSuffix(val, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			if err != nil || f < 0 || f > 100 {
				v.add(p, "%q is not a percentage between 0%% and 100%%", val)
			}
			continue
		}
		if q, err := resource.ParseQuantity(val); err != nil || q.Sign() < 0 {
			v.add(p, "%q is not a non-negative quantity or percentage (e.g. 100Mi, 10%%)", val)
		}
	}
}

func validateBlockDevices(v *validator, bdms []*BlockDeviceMapping) {
	const path = "spec.blockDeviceMappings"
	if len(bdms) > 50 {
		v.add(path, "%d mappings, at most 50 are allowed", len(bdms))
	}
	roots := 0
	for i, m := range bdms {
		p := joinIndex(path, i)
		if m == nil {
			v.add(p, "empty block device mapping")
			continue
		}
		if m.RootVolume {
			roots++
		}
		if m.EBS == nil {
			continue
		}
		ep := joinField(p, "ebs")
		e := m.EBS
		if e.SnapshotID == nil && e.VolumeSize == nil {
			v.add(ep, "snapshotID or volumeSize must be defined")
		}
		if e.VolumeSize != nil && !volumeSizeRe.MatchString(e.VolumeSize.String()) {
			v.add(joinField(ep, "volumeSize"), "%s is not a volume size in Gi, G, Ti or T (e.g. 100Gi, at most 64T)", e.VolumeSize.String())
		}
		if e.VolumeType != nil {
			v.oneOf(joinField(ep, "volumeType"), *e.VolumeType, volumeTypes...)
		}
		if e.IOPS != nil && *e.IOPS < 0 {
			v.add(joinField(ep, "iops"), "%d must not be negative", *e.IOPS)
		}
		if r := e.VolumeInitializationRate; r != nil {
			inRange(v, joinField(ep, "volumeInitializationRate"), r, 100, 300)
			if e.SnapshotID == nil || *e.SnapshotID == "" {
				v.add(ep, "snapshotID must be set when volumeInitializationRate is set")
			}
		}
		if e.Throughput != nil && *e.Throughput < 0 {
			v.add(joinField(ep, "throughput"), "%d must not be negative", *e.Throughput)
		}
	}
	if roots > 1 {
		v.add(path, "must have only one blockDeviceMappings with rootVolume")
	}
}

// validateEC2Limits refuses a class whose launches EC2 would refuse for
// size (ec2limits.go): tags each instance cannot carry once nodewright adds
// its own, a tag EC2 does not take, or user data over 16 KB on its own
// (nodewright's bootstrap wraps it; internal/aws checks the whole before
// it creates a launch template).
func validateEC2Limits(v *validator, s *EC2NodeClassSpec) {
	if n := LaunchTagCount(s.Tags); n > MaxTagsPerResource {
		v.add("spec.tags", "%d tags, and nodewright adds %d of its own to each instance and volume: EC2 allows at most %d per resource, so at most %d here",
			len(s.Tags), n-len(s.Tags), MaxTagsPerResource, MaxTagsPerResource-(n-len(s.Tags)))
	}
	for _, k := range sortedKeys(s.Tags) {
		if msg := TagProblem(k, s.Tags[k]); msg != "" {
			v.add(joinKey("spec.tags", k), "%s", msg)
		}
	}
	if u := s.UserData; u != nil && len(*u) > MaxUserDataBytes {
		v.add("spec.userData", "%d bytes: EC2 limits user data to %d bytes (before base64), and nodewright adds its bootstrap to it", len(*u), MaxUserDataBytes)
	}
}
