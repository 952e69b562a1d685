package simulation

import (
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/workload"
)

// Sources names the files a simulation reads, as `simulate` takes them.
type Sources struct {
	Config   string // file or folder of NodePool and EC2NodeClass YAML
	Workload string // manifests of the pods to place
	Nodes    string // optional: existing Nodes and their Pods
	Catalog  string // "builtin" (or empty) or a folder laid out like aws-data
	Region   string // empty: inferred from the NodePools' zones
}

// Setup is everything a solve needs, loaded from Sources.
type Setup struct {
	Config   *apis.Config
	Catalog  *catalog.Catalog
	Workload *workload.Workload
	Input    scheduling.Input
	// Warnings from the configuration and the manifests, one line each.
	Warnings []string
}

// Load reads and validates the sources. Warnings collected before an error
// are returned with it, so a caller can print them.
func Load(src Sources) (*Setup, error) {
	s := &Setup{}
	cfg, err := apis.Load(src.Config)
	if cfg != nil {
		for _, w := range cfg.Warnings {
			s.Warnings = append(s.Warnings, w.String())
		}
	}
	if err != nil {
		return s, fmt.Errorf("load --config %s: %w", src.Config, err)
	}
	if len(cfg.NodePools) == 0 {
		return s, fmt.Errorf("--config %s: no NodePool found", src.Config)
	}
	s.Config = cfg
	region := src.Region
	if region == "" {
		region = InferRegion(cfg)
	}
	if s.Catalog, err = LoadCatalog(src.Catalog, region); err != nil {
		return s, err
	}
	files := []string{src.Workload}
	if src.Nodes != "" {
		files = append(files, src.Nodes)
	}
	if s.Workload, err = workload.ParseFiles(files...); err != nil {
		return s, fmt.Errorf("read workload: %w", err)
	}
	s.Warnings = append(s.Warnings, s.Workload.Warnings...)
	s.Input, err = input(cfg, s.Catalog, s.Workload)
	return s, err
}

const DefaultRegion = "us-east-1"

// InferRegion returns the region the NodePools' zone requirements name, when
// they name exactly one; a simulation in another region could place nothing.
func InferRegion(cfg *apis.Config) string {
	if r := ZoneRegion(cfg); r != "" {
		return r
	}
	return DefaultRegion
}

// ZoneRegion is the one region the NodePools' zone requirements name, or ""
// when they name none or several (`local up --config` starts its cloud
// there).
func ZoneRegion(cfg *apis.Config) string {
	regions := map[string]bool{}
	for _, np := range cfg.NodePools {
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.Key != catalog.LabelTopologyZone || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			for _, z := range r.Values {
				if len(z) > 1 {
					regions[z[:len(z)-1]] = true
				}
			}
		}
	}
	if len(regions) == 1 {
		for r := range regions {
			return r
		}
	}
	return ""
}

// LoadCatalog reads the builtin catalog or a folder laid out like aws-data.
func LoadCatalog(src, region string) (*catalog.Catalog, error) {
	if src == "" || src == "builtin" {
		c, err := catalog.Builtin(region)
		if err != nil {
			return nil, fmt.Errorf("--catalog builtin: %w; pass --region %s or --catalog DIR with offerings-%s.json", err,
				strings.Join(catalog.BuiltinRegions(), "|"), region)
		}
		return c, nil
	}
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("--catalog %s: %w", src, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("--catalog %s: not a folder (want \"builtin\" or a folder like aws-data)", src)
	}
	return catalog.LoadDir(src, region)
}
