//go:build !race

package gomlxtest

// RaceEnabled reports a -race build.
const RaceEnabled = false
