package admission

import (
	"crypto/sha256"
	"encoding/hex"
)

// CABundleDigestProperty names the CA bundle's digest among the properties
// the stack trusts its registrar with (the bundle itself is too large for
// Lambda's 4 KB environment).
const CABundleDigestProperty = "CABundleSHA256"

// CABundleDigest is the digest the stack records, and the registrar
// checks, for a webhook's CA bundle.
func CABundleDigest(bundle string) string {
	sum := sha256.Sum256([]byte(bundle))
	return hex.EncodeToString(sum[:])
}
