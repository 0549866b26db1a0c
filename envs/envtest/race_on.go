//go:build race

package envtest

// raceEnabled is true in -race builds, which run ~10× slower.
const raceEnabled = true
