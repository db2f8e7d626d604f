package store

import (
	"os"
	"syscall"
)

// fdatasync writes the file's data, and only the metadata needed to read
// it back, to the disk.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
