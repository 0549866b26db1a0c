//go:build cgo && !noxla

package learner

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/go-xla/compute/xla"
)

// XLAAvailable reports whether this binary was built with the XLA backend
// (cgo and no noxla tag).
const XLAAvailable = true

func newXLABackend(pluginPath string) (compute.Backend, error) {
	xla.EnableAutoInstall(false) // never download plugins behind the user's back
	b, err := xla.New(pluginPath)
	if err != nil {
		return nil, fmt.Errorf("learner: device cuda: loading PJRT plugin %s: %w", pluginPath, err)
	}
	if !b.(*xla.Backend).IsCUDA() {
		b.Finalize()
		return nil, fmt.Errorf("learner: device cuda: plugin %s is not a CUDA plugin", pluginPath)
	}
	return b, nil
}
