// Package ec2sim is the simulated EC2 region: VPC, subnets, security groups,
// EKS AMIs, launch templates, fleets, capacity reservations and instances
// with their state machine.
// Handlers take decoded aws-sdk-go-v2 input structs and return SDK output
// structs; package wire turns those into the EC2 query protocol.
package ec2sim

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
)

// Config configures a simulated region.
type Config struct {
	Region            string
	Account           string
	ClusterName       string
	KubernetesVersion string
	Catalog           *Catalog
	Seed              uint64
	// Now returns the simulated wall clock (default time.Now).
	Now func() time.Time
	// After runs f after d of simulated time (default time.AfterFunc).
	After func(d time.Duration, f func())
	// PendingDelay is how long an instance stays pending (default 5s).
	PendingDelay time.Duration
	// ConsistencyDelay is how long a launched instance stays unknown to
	// DescribeInstances and TerminateInstances (rule launch-consistency;
	// 0: visible at once).
	ConsistencyDelay time.Duration
	// ShuttingDownDelay is how long an instance stays shutting-down (default 10s).
	ShuttingDownDelay time.Duration
	// Rules are the AWS rules the region enforces (zero: all of them);
	// NODEWRIGHT_SIM_RULES_OFF turns more off (package fidelity).
	Rules fidelity.Set
	// AccountState is what launches read of the account (quotas.go).
	AccountState AccountState
	// Throttle sizes the request and resource token buckets (throttle.go;
	// zero fields: EC2's documented sizes). They refill from Now.
	Throttle Throttle
}

// Transition is one instance state change, reported to observers after the
// cloud's lock is released.
type Transition struct {
	Instance types.Instance
	From, To types.InstanceStateName
	// CapacityType is "spot" or "on-demand".
	CapacityType string
	// UserData is the base64 user data of the instance's launch template.
	UserData string
}

// Cloud is one simulated EC2 region. Safe for concurrent use.
type Cloud struct {
	cfg Config

	mu            sync.Mutex
	rng           *rand.Rand
	vpcID         string
	subnets       []*subnet
	groups        []*types.SecurityGroup
	images        []*types.Image
	templates     map[string]*launchTemplate // by id
	ltSeq         int
	resourceTags  map[string]*[]types.Tag // volumes and network interfaces
	instances     map[string]*instance
	order         []string                // instance ids in launch order
	fleets        map[string]*fleetResult // by client token
	capacity      map[Pool]int            // remaining launches per pool; absent = unlimited
	spotOverrides map[[2]string]float64
	releases      map[string]int    // AMI releases published per family
	ssm           map[string]string // SSM parameter name -> value (EKS AMI parameters)
	observers     []func(Transition)
	hideNew       int                                   // see HideNewInstances
	reservations  map[string]*types.CapacityReservation // by id
	resOrder      []string                              // reservation ids in creation order
	// placementGroups by id, pgOrder their ids in creation order.
	placementGroups map[string]*types.PlacementGroup
	pgOrder         []string
	// throttle is the account's token buckets in this region (throttle.go).
	throttle *throttler
}

// Pool is an EC2 capacity pool.
type Pool struct {
	InstanceType, Zone, CapacityType string
}

// New seeds a region with a default VPC, tagged subnets per zone, security
// groups and EKS-optimized AMIs for the configured Kubernetes version.
func New(cfg Config) (*Cloud, error) {
	if cfg.Region == "" || cfg.ClusterName == "" || cfg.KubernetesVersion == "" {
		return nil, fmt.Errorf("ec2sim: region, cluster name and kubernetes version are required")
	}
	if cfg.Account == "" {
		cfg.Account = "111122223333"
	}
	if cfg.Catalog == nil {
		cfg.Catalog = DefaultCatalog(cfg.Region)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	if cfg.PendingDelay == 0 {
		cfg.PendingDelay = 5 * time.Second
	}
	if cfg.ShuttingDownDelay == 0 {
		cfg.ShuttingDownDelay = 10 * time.Second
	}
	rules, err := cfg.Rules.WithEnv()
	if err != nil {
		return nil, fmt.Errorf("ec2sim: %w", err)
	}
	cfg.Rules = rules
	c := &Cloud{
		cfg:             cfg,
		rng:             rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		templates:       map[string]*launchTemplate{},
		instances:       map[string]*instance{},
		fleets:          map[string]*fleetResult{},
		capacity:        map[Pool]int{},
		spotOverrides:   map[[2]string]float64{},
		ssm:             map[string]string{},
		releases:        map[string]int{},
		resourceTags:    map[string]*[]types.Tag{},
		reservations:    map[string]*types.CapacityReservation{},
		placementGroups: map[string]*types.PlacementGroup{},
		throttle:        newThrottler(cfg.Throttle, cfg.Now),
	}
	c.seedNetwork()
	c.seedImages()
	return c, nil
}

// Config returns the region's configuration (with defaults applied).
func (c *Cloud) Config() Config { return c.cfg }

// OnTransition registers an observer of instance state changes.
func (c *Cloud) OnTransition(f func(Transition)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observers = append(c.observers, f)
}

// newID returns prefix-<17 hex digits>, deterministic for a given seed. Caller holds mu.
func (c *Cloud) newID(prefix string) string {
	return fmt.Sprintf("%s-%017x", prefix, c.rng.Uint64()&0xfffffffffffffff)
}

// SetCapacity limits how many more instances a pool can launch; n < 0 removes the limit.
func (c *Cloud) SetCapacity(p Pool, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < 0 {
		delete(c.capacity, p)
		return
	}
	c.capacity[p] = n
}

func (c *Cloud) remaining(p Pool) (int, bool) {
	n, limited := c.capacity[p]
	return n, limited
}
