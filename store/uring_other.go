//go:build !linux

package store

import (
	"errors"
	"os"
)

// uring is io_uring's, which only Linux has (uring_linux.go).
type uring struct{}

func newURing() (*uring, error) { return nil, errors.New("io_uring: not on this system") }

func (*uring) fdatasync(f *os.File) error { return fdatasync(f) }

func (*uring) close() {}
