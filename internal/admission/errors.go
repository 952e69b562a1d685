package admission

import "errors"

var (
	errEmptySecret = errors.New("admission webhook needs a shared secret")
	errNoNudger    = errors.New("admission webhook needs a nudger")
)
