//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive, non-blocking flock on dir/name, held until
// the returned function runs (or the process dies: the kernel drops it).
func lockDir(dir, name string) (func(), error) {
	f, err := os.OpenFile(dir+"/"+name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s/%s is locked by another process (%w)", dir, name, err)
	}
	return func() { f.Close() }, nil
}
