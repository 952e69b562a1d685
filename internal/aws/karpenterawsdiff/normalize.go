package karpenterawsdiff

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Absent renders a field one side does not send.
const Absent = "(absent)"

// Flat is a launch's requests as path -> value: every field both sides
// could send, with what is generated (names, ids, tokens) and nodewright's
// own bookkeeping tags taken out, lists keyed by what identifies their
// items rather than their order, and user data decoded.
type Flat map[string]string

// Flatten normalizes one provider's requests for one claim.
//
// Templates are named by what they hold, "<image>|<instance types of
// their overrides>", since each side names its templates by a hash of its
// own. Override priorities become ranks (1 = first), so that prices and
// price ranks compare by the order they give. Tags under nodewright.io/,
// karpenter.sh/nodeclaim and a Name equal to the claim's name are dropped:
// nodewright tags the claim at launch (its claims are records, not
// objects a controller tags the instance from later), Karpenter tags
// karpenter.sh/nodeclaim and Name (the Node's name) after the launch with
// CreateTags.
func Flatten(r Requests, claimName string) (Flat, error) {
	out := Flat{}
	if r.Fleet == nil {
		out["fleet"] = "(no CreateFleet)"
		return out, nil
	}
	byName := map[string]*ec2.CreateLaunchTemplateInput{}
	for _, lt := range r.Templates {
		byName[sdkaws.ToString(lt.LaunchTemplateName)] = lt
	}
	ranks := priorityRanks(r.Fleet)
	used := map[string]bool{}
	var keys []string
	f := flattener{out: out, claim: claimName, ranks: ranks}
	for i, cfg := range r.Fleet.LaunchTemplateConfigs {
		name := ""
		if s := cfg.LaunchTemplateSpecification; s != nil {
			name = sdkaws.ToString(s.LaunchTemplateName)
		}
		lt, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("fleet config %d names template %q, which neither side created", i, name)
		}
		used[name] = true
		key := templateKey(lt, cfg.Overrides)
		keys = append(keys, key)
		spec := *cfg.LaunchTemplateSpecification
		spec.LaunchTemplateName = nil
		cfg.LaunchTemplateSpecification = &spec
		if err := f.walk("fleet.LaunchTemplateConfigs["+key+"]", cfg); err != nil {
			return nil, err
		}
		ltc := *lt
		ltc.LaunchTemplateName = nil
		if err := f.walk("lt["+key+"]", ltc); err != nil {
			return nil, err
		}
	}
	for name := range byName {
		if !used[name] {
			keys = append(keys, "unused:"+name)
		}
	}
	slices.Sort(keys)
	out["templates"] = strings.Join(keys, " ; ")
	fleet := *r.Fleet
	fleet.LaunchTemplateConfigs = nil
	if fleet.ClientToken != nil {
		fleet.ClientToken = sdkaws.String("(set)")
	}
	return out, f.walk("fleet", fleet)
}

func templateKey(lt *ec2.CreateLaunchTemplateInput, overrides []ec2types.FleetLaunchTemplateOverridesRequest) string {
	var types []string
	for _, o := range overrides {
		if !slices.Contains(types, string(o.InstanceType)) {
			types = append(types, string(o.InstanceType))
		}
	}
	slices.Sort(types)
	image := ""
	if lt.LaunchTemplateData != nil {
		image = sdkaws.ToString(lt.LaunchTemplateData.ImageId)
	}
	return image + "|" + strings.Join(types, ",")
}

// priorityRanks maps each priority value of the fleet's overrides to its
// dense rank.
func priorityRanks(in *ec2.CreateFleetInput) map[float64]int {
	seen := map[float64]bool{}
	for _, c := range in.LaunchTemplateConfigs {
		for _, o := range c.Overrides {
			if o.Priority != nil {
				seen[*o.Priority] = true
			}
		}
	}
	values := slices.Sorted(maps.Keys(seen))
	ranks := map[float64]int{}
	for i, v := range values {
		ranks[v] = i + 1
	}
	return ranks
}

type flattener struct {
	out   Flat
	claim string
	ranks map[float64]int
}

// walk flattens v (an SDK input struct) under prefix.
func (f flattener) walk(prefix string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", prefix, err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return fmt.Errorf("decode %s: %w", prefix, err)
	}
	return f.value(prefix, generic)
}

func (f flattener) value(path string, v any) error {
	switch x := v.(type) {
	case nil:
		return nil
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if err := f.field(path, k, x[k]); err != nil {
				return err
			}
		}
	case []any:
		return f.list(path, x)
	case string:
		if x != "" {
			f.out[path] = x
		}
	case float64:
		f.out[path] = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		f.out[path] = fmt.Sprint(x)
	}
	return nil
}

func (f flattener) field(path, k string, v any) error {
	p := path + "." + k
	switch {
	case k == "UserData":
		s, _ := v.(string)
		ud, err := decodeUserData(s)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return f.value(p, ud)
	case k == "Priority":
		if n, ok := v.(float64); ok {
			f.out[p] = "rank " + strconv.Itoa(f.ranks[n])
		}
		return nil
	}
	return f.value(p, v)
}

// listKeys name the items of the lists whose order means nothing.
var listKeys = map[string]func(map[string]any) string{
	"TagSpecifications": func(m map[string]any) string { return str(m["ResourceType"]) },
	"BlockDeviceMappings": func(m map[string]any) string {
		return str(m["DeviceName"])
	},
	"NetworkInterfaces": func(m map[string]any) string {
		return "card" + str(m["NetworkCardIndex"]) + "/device" + str(m["DeviceIndex"])
	},
	"Overrides": func(m map[string]any) string {
		where := str(m["SubnetId"])
		if where == "" {
			where = str(m["AvailabilityZone"])
		}
		return str(m["InstanceType"]) + "@" + where
	},
}

// setLists are lists of strings whose order means nothing.
var setLists = map[string]bool{"SecurityGroupIds": true, "Groups": true}

func (f flattener) list(path string, items []any) error {
	name := path[strings.LastIndex(path, ".")+1:]
	if name == "Tags" {
		for _, it := range items {
			m, _ := it.(map[string]any)
			k, v := str(m["Key"]), str(m["Value"])
			if dropTag(k, v, f.claim) {
				continue
			}
			f.out[path+"["+k+"]"] = v
		}
		return nil
	}
	if setLists[name] {
		var vals []string
		for _, it := range items {
			vals = append(vals, str(it))
		}
		sort.Strings(vals)
		if len(vals) > 0 {
			f.out[path] = strings.Join(vals, ",")
		}
		return nil
	}
	key := listKeys[name]
	for i, it := range items {
		m, isMap := it.(map[string]any)
		k := strconv.Itoa(i)
		if key != nil && isMap {
			k = key(m)
		}
		if err := f.value(path+"["+k+"]", it); err != nil {
			return err
		}
	}
	return nil
}

func dropTag(k, v, claim string) bool {
	return strings.HasPrefix(k, "nodewright.io/") || k == "karpenter.sh/nodeclaim" || (k == "Name" && v == claim)
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

// bracketed are the path segments that name one template, config or
// override; General drops them.
var bracketed = regexp.MustCompile(`(^lt|LaunchTemplateConfigs|Overrides)\[[^\]]*\]`)

// General is a path without the names of its template, fleet config and
// override: the field, whichever launch it came from.
func General(path string) string { return bracketed.ReplaceAllString(path, "$1") }
