package aws

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"

	"github.com/nodewright/nodewright/internal/apis"
)

// The last check of what nodewright sends against EC2's size limits
// (apis/ec2limits.go): validation refuses classes that cannot fit them,
// and these checks keep a request that would still not fit (nodewright's
// bootstrap around the user data, a class that skipped validation) from
// being sent. Each error wraps ErrNodeClassNotReady: no launch of the
// class can succeed until it is changed.

// checkUserDataSize refuses base64 user data over EC2's 16 KB once
// decoded ("User data is limited to 16 KB, in raw form, before it is
// base64-encoded": EC2 user guide; CreateLaunchTemplate answers
// InvalidUserData.Malformed).
func checkUserDataSize(nodeClass, b64 string) error {
	n := base64.StdEncoding.DecodedLen(len(b64))
	if raw, err := base64.StdEncoding.DecodeString(b64); err == nil {
		n = len(raw)
	}
	if n > apis.MaxUserDataBytes {
		return fmt.Errorf("EC2NodeClass %s: %w: its user data (spec.userData with nodewright's bootstrap) is %d bytes, more than EC2's limit of %d before base64: shorten spec.userData",
			nodeClass, ErrNodeClassNotReady, n, apis.MaxUserDataBytes)
	}
	return nil
}

// checkTags refuses the tags of one resource when EC2 would: more than 50
// user tags (the aws: prefix does not count, and is refused), or a key or
// value over its length.
func checkTags(nodeClass, resource string, tags map[string]string) error {
	n := 0
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if msg := apis.TagProblem(k, tags[k]); msg != "" {
			return fmt.Errorf("EC2NodeClass %s: %w: %s tag %q: %s", nodeClass, ErrNodeClassNotReady, resource, k, msg)
		}
		n++
	}
	if n > apis.MaxTagsPerResource {
		return fmt.Errorf("EC2NodeClass %s: %w: %s would carry %d tags, more than EC2's %d: remove some of spec.tags",
			nodeClass, ErrNodeClassNotReady, resource, n, apis.MaxTagsPerResource)
	}
	return nil
}
