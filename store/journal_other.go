//go:build !linux

package store

import "os"

// fdatasync is Sync where the system has no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }
