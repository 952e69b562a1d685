package aws

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/basedeps"
)

// Options configure a Provider.
type Options struct {
	// ClusterName is the EKS cluster the provider launches for (required).
	ClusterName string
	// Region is the AWS region (required).
	Region string
	// Owner is this stack's owner value (settings.Owner, the NodeClaim
	// table's ARN; required). Everything the provider creates carries it
	// under TagOwner, and it lists, garbage-collects and terminates only
	// what carries it.
	Owner string
	// DiscoveryTTL bounds how stale subnets, security groups, AMIs and cluster
	// facts may be (default 1 minute; errors invalidate early).
	DiscoveryTTL time.Duration
	// ICETTL is how long a capacity error keeps an offering out (default 3 minutes).
	ICETTL time.Duration
	// PriceRefresh is how old prices may get before Refresh fetches again (default 12 hours).
	PriceRefresh time.Duration
	// MaxInstanceTypes caps the instance types of one CreateFleet (default 60).
	MaxInstanceTypes int
	// InstanceProfileName maps an EC2NodeClass role to its instance profile
	// (default InstanceProfileName, the CDK app's convention).
	InstanceProfileName func(cluster, role string) string
	// LaunchConfirmWait is how long Launch keeps looking (with backoff) for
	// the instance of an earlier launch with the same ClientToken before it
	// gives up and returns ErrLaunchInDoubt (default 30 seconds).
	LaunchConfirmWait time.Duration
	// MinValuesBestEffort launches a claim whose launchable options no
	// longer meet its minValues (Karpenter's MIN_VALUES_POLICY=BestEffort:
	// InstanceTypes.Truncate refuses only under Strict, v1.14.1
	// pkg/cloudprovider/types.go); false refuses it, as Strict does.
	MinValuesBestEffort bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (o *Options) defaults() error {
	if o.ClusterName == "" {
		return fmt.Errorf("aws provider: ClusterName is required")
	}
	if o.Region == "" {
		return fmt.Errorf("aws provider: Region is required")
	}
	if o.Owner == "" {
		return fmt.Errorf("aws provider: Owner is required (the stack's %s)", TagOwner)
	}
	basedeps.Default(&o.DiscoveryTTL, time.Minute)
	basedeps.Default(&o.ICETTL, 3*time.Minute)
	basedeps.Default(&o.PriceRefresh, 12*time.Hour)
	basedeps.Default(&o.MaxInstanceTypes, 60)
	basedeps.Default(&o.LaunchConfirmWait, 30*time.Second)
	if o.InstanceProfileName == nil {
		o.InstanceProfileName = InstanceProfileName
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Provider is the EC2 side of nodewright for one cluster. Safe for concurrent use.
type Provider struct {
	opts    Options
	clients Clients
	ice     *ICECache
	log     *slog.Logger

	cluster *ttlCache[ClusterInfo]
	subnets *ttlCache[[]Subnet]
	groups  *ttlCache[[]SecurityGroup]
	amis    *ttlCache[[]AMI]
	// placementGroups by selector.
	placementGroups *ttlCache[PlacementGroup]
	// reservationIDs are the active reservations a class selects, by class
	// and selector (drift only: launches read reservations afresh).
	reservationIDs *ttlCache[[]string]
	templates      *ttlCache[string] // launch template name -> id, for names known to exist
	catalogs       catalogCache
	userData       userDataMemo

	// spot is set when spot launches cannot succeed for a while (the spot
	// service-linked role is missing: spotfallback.go).
	spot spotBlock

	priceMu     sync.Mutex
	priceMemo   *PriceSnapshot
	priceMemoAt time.Time
}

// New builds a Provider. ice may be nil (an in-process ICE set is used).
func New(opts Options, clients Clients, ice *ICECache) (*Provider, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if clients.EC2 == nil {
		return nil, fmt.Errorf("aws provider: EC2 client is required")
	}
	if ice == nil {
		ice = NewICECache(nil, opts.ICETTL, opts.Now)
	}
	return &Provider{
		opts:            opts,
		clients:         clients,
		ice:             ice,
		log:             opts.Logger.With("component", "aws", "cluster", opts.ClusterName),
		cluster:         newTTLCache[ClusterInfo](opts.DiscoveryTTL, opts.Now),
		subnets:         newTTLCache[[]Subnet](opts.DiscoveryTTL, opts.Now),
		groups:          newTTLCache[[]SecurityGroup](opts.DiscoveryTTL, opts.Now),
		amis:            newTTLCache[[]AMI](opts.DiscoveryTTL, opts.Now),
		placementGroups: newTTLCache[PlacementGroup](opts.DiscoveryTTL, opts.Now),
		reservationIDs:  newTTLCache[[]string](opts.DiscoveryTTL, opts.Now),
		templates:       newTTLCache[string](time.Hour, opts.Now),
	}, nil
}

// ICE returns the provider's unavailable-offerings set.
func (p *Provider) ICE() *ICECache { return p.ice }

// InvalidateDiscovery drops every cached discovery result (subnets, security
// groups, AMIs, placement groups, cluster facts); the next call asks AWS again.
func (p *Provider) InvalidateDiscovery() {
	p.placementGroups.invalidateAll()
	p.reservationIDs.invalidateAll()
	p.cluster.invalidateAll()
	p.subnets.invalidateAll()
	p.groups.invalidateAll()
	p.amis.invalidateAll()
}

// ClusterTagKey is the ownership tag every instance this cluster launches carries.
func ClusterTagKey(cluster string) string { return "kubernetes.io/cluster/" + cluster }

// Tag keys nodewright puts on EC2 resources (Karpenter's names).
const (
	TagNodePool       = "karpenter.sh/nodepool"
	TagNodeClaim      = "karpenter.sh/nodeclaim"
	TagNodeClass      = "karpenter.k8s.aws/ec2nodeclass"
	TagClusterName    = "karpenter.k8s.aws/cluster"
	TagEKSClusterName = "eks:eks-cluster-name"
	TagName           = "Name"
)

// TagManagedBy (with value ManagedBy) marks every instance, volume, network
// interface, fleet and launch template nodewright creates. Karpenter's
// resources carry the same cluster and karpenter.sh/* tags, so this tag is
// the only thing that tells them apart: nodewright lists, adopts and
// terminates only instances that carry it, and its IAM policy (infra/)
// allows TerminateInstances only on them, so both can run side by side
// during a migration. It is only ever set at creation.
const (
	TagManagedBy = "nodewright.io/managed-by"
	ManagedBy    = "nodewright"
)

// TagOwner names the one stack (its NodeClaim table's ARN, settings.Owner)
// whose controllers may garbage-collect or terminate a resource. It is set
// only at creation (IAM allows it on no existing resource), so a second stack
// for the same cluster, or a re-created table, never owns another's instances.
const TagOwner = "nodewright.io/owner"

// TagInstanceNodeClass names the EC2NodeClass on instances, volumes and
// network interfaces. It is not Karpenter's karpenter.k8s.aws/ec2nodeclass
// (which launch templates keep): Karpenter's instance garbage collector
// lists instances carrying karpenter.sh/nodepool, karpenter.k8s.aws/ec2nodeclass
// and eks:eks-cluster-name and terminates those without a NodeClaim object
// after 30 seconds, which during a migration would be all of nodewright's.
const TagInstanceNodeClass = "nodewright.io/ec2nodeclass"

// InstanceProfileName is the instance profile the CDK app creates for an
// EC2NodeClass role (see the package documentation).
func InstanceProfileName(cluster, role string) string {
	if i := strings.LastIndex(role, "/"); i >= 0 {
		role = role[i+1:]
	}
	name := "nodewright-" + cluster + "-" + role
	if len(name) <= 128 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:119] + "-" + hex.EncodeToString(sum[:4])
}
