//go:build !cgo || noxla

package learner

import (
	"fmt"

	"github.com/gomlx/compute"
)

// XLAAvailable reports whether this binary was built with the XLA backend
// (cgo and no noxla tag).
const XLAAvailable = false

func newXLABackend(pluginPath string) (compute.Backend, error) {
	return nil, fmt.Errorf("learner: device cuda: this binary was built without the XLA backend (CGO_ENABLED=0 or -tags noxla); rebuild with cgo to use %s", pluginPath)
}
