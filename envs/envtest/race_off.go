//go:build !race

package envtest

const raceEnabled = false
