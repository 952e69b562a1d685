package store

import (
	"bytes"
	"strconv"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodewright/nodewright/internal/apis"
)

// claimDecodes keeps the claims a store's last full listing decoded. Every
// pass of a warm function lists every claim, and unzipping and decoding the
// 2,000 claims of a 2,000-node cluster, almost all unchanged since the pass
// before, was a tenth of the provisioner's CPU in a 5,000-pod burst. A claim
// is reused only when its stored body is byte for byte the one it was
// decoded from (its name and version are not enough: a tombstone's name can
// be written anew from version 1), and each listing gets its own deep copy,
// which its caller may change.
type claimDecodes struct {
	last atomic.Pointer[map[string]decodedClaim]
}

// decodedClaim is a claim and the compressed body it was decoded from.
type decodedClaim struct {
	body  []byte
	claim *apis.NodeClaim
}

// decode is decodeClaim, reusing the last listing's claim when the item's
// body is the one it was decoded from. It also returns what the next
// listing may reuse.
func (d *claimDecodes) decode(av map[string]types.AttributeValue) (*apis.NodeClaim, claimItem, decodedClaim, error) {
	it, err := claimItemOf(av)
	if err != nil {
		return nil, it, decodedClaim{}, err
	}
	if last := d.last.Load(); last != nil {
		if prev, ok := (*last)[it.SK]; ok && bytes.Equal(prev.body, it.Body) {
			nc := prev.claim.DeepCopy()
			nc.ResourceVersion = strconv.FormatInt(it.Version, 10)
			return nc, it, prev, nil
		}
	}
	nc, err := decodeClaimBody(it)
	if err != nil {
		return nil, it, decodedClaim{}, err
	}
	return nc, it, decodedClaim{body: it.Body, claim: nc.DeepCopy()}, nil
}
