package apis

import (
	"strings"
	"unicode/utf8"
)

// EC2's limits on what an EC2NodeClass becomes: the tags of the instances,
// volumes, interfaces and templates nodewright creates from it, and the
// user data of its launch templates. Validation refuses a class that
// cannot fit them; internal/aws checks what it builds against them before
// each call, so that no request EC2 would refuse is sent.

// The tag limits. Source: the EC2 user guide, "Tag restrictions" (50 tags
// per resource; keys up to 128 and values up to 256 Unicode characters;
// the aws: prefix is reserved for AWS, and its tags do not count against
// the 50); the CreateTags API reference ("Each resource can have a
// maximum of 50 tags").
const (
	MaxTagsPerResource = 50
	MaxTagKeyLength    = 128
	MaxTagValueLength  = 256
)

// MaxUserDataBytes is EC2's user data limit. Source: the EC2 user guide,
// "Run commands when you launch an EC2 instance with user data input":
// "User data is limited to 16 KB, in raw form, before it is
// base64-encoded."
const MaxUserDataBytes = 16384

// LaunchTags is how many tags nodewright adds to spec.tags on each
// instance and volume it launches (internal/aws Provider.Tags: the
// cluster, ownership, NodePool, class, claim and Name tags). It is the
// most any of its resources get: interfaces and launch templates carry
// fewer. Name is added only when spec.tags does not set it (LaunchTagName).
// internal/aws's TestLaunchTagsCount keeps this equal to what
// Provider.Tags adds.
const LaunchTags = 8

// LaunchTagName is the one tag of the LaunchTags that spec.tags may set
// itself (nodewright then keeps the class's value).
const LaunchTagName = "Name"

// LaunchTagCount is how many user tags each instance and volume launched
// from a class with these spec.tags carries.
func LaunchTagCount(specTags map[string]string) int {
	n := len(specTags) + LaunchTags
	if _, ok := specTags[LaunchTagName]; ok {
		n--
	}
	return n
}

// IsReservedTagKey reports a tag key of the aws: prefix, in any case (the
// EC2 user guide's "Tag restrictions"; AWS's service guides: "any upper or
// lowercase combination").
func IsReservedTagKey(k string) bool {
	return len(k) >= 4 && strings.EqualFold(k[:4], "aws:")
}

// TagProblem says why EC2 refuses a tag ("" when it does not): a reserved
// key or a key or value over its length, counted in characters.
func TagProblem(k, v string) string {
	switch {
	case IsReservedTagKey(k):
		return "tag keys starting with 'aws:' are reserved for AWS"
	case utf8.RuneCountInString(k) > MaxTagKeyLength:
		return "tag key is longer than 128 characters, EC2's limit"
	case utf8.RuneCountInString(v) > MaxTagValueLength:
		return "tag value is longer than 256 characters, EC2's limit"
	}
	return ""
}
