//go:build !unix

package trajectory

import "os"

// tryLock is a no-op where flock is unavailable: temporary files are then
// only removed by a writer's own Abort or by CleanTemp callers that know no
// writer is active.
func tryLock(f *os.File) (bool, error) { return true, nil }

func lock(f *os.File) error { return nil }
