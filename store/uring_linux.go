package store

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A uring syncs a file through an io_uring (io_uring_setup(2)), one
// fdatasync at a time: the kernel runs the sync on a worker thread of its
// own, and the goroutine waiting for it parks on an eventfd through the
// runtime's poller. fdatasync(2) blocks the thread that calls it, with the
// runtime's processor, which the runtime's monitor then takes back and
// hands to another thread, a thousand times a second and more at a
// saturated store (SPEC-NOTES, "The journal's sync through an io_uring").
type uring struct {
	fd   int
	ring []byte // the rings, mapped once (IORING_FEAT_SINGLE_MMAP)
	sqes []byte
	ev   *os.File // the eventfd the ring signals each completion on

	sqTail, sqMask, cqHead, cqTail, cqMask *uint32
	sqArray                                unsafe.Pointer
	cqes                                   unsafe.Pointer
	buf                                    [8]byte
}

// The ABI's values (include/uapi/linux/io_uring.h).
const (
	ioringOffSQRing       = 0
	ioringOffSQEs         = 0x10000000
	ioringFeatSingleMmap  = 1 << 0
	ioringOpFsync         = 3
	ioringFsyncDatasync   = 1 << 0
	ioringRegisterEventfd = 4
	uringEntries          = 4
	uringSQESize, cqeSize = 64, 16
	uringParamsSize       = 120
	sqOffHead, sqOffTail  = 40, 44
	sqOffMask, sqOffArray = 48, 64
	cqOffHead, cqOffTail  = 80, 84
	cqOffMask, cqOffCQEs  = 88, 100
	paramsSQEntries       = 0
	paramsCQEntries       = 4
	paramsFeatures        = 20
)

// newURing sets up a ring of a few entries. It fails where the kernel has
// no io_uring (before 5.4, which maps both rings at once), where it is
// turned off (kernel.io_uring_disabled), or where a sandbox refuses its
// system calls (Docker's default seccomp profile).
func newURing() (*uring, error) {
	var p [uringParamsSize]byte
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uringEntries, uintptr(unsafe.Pointer(&p[0])), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	u := &uring{fd: int(fd)}
	ok := false
	defer func() {
		if !ok {
			u.close()
		}
	}()
	le := func(off int) uint32 { return *(*uint32)(unsafe.Pointer(&p[off])) }
	if le(paramsFeatures)&ioringFeatSingleMmap == 0 {
		return nil, errors.New("io_uring: no single mapping of the rings")
	}
	sqEntries, cqEntries := le(paramsSQEntries), le(paramsCQEntries)
	size := max(int(le(sqOffArray))+int(sqEntries)*4, int(le(cqOffCQEs))+int(cqEntries)*cqeSize)
	var err error
	if u.ring, err = unix.Mmap(u.fd, ioringOffSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("io_uring: mapping the rings: %w", err)
	}
	if u.sqes, err = unix.Mmap(u.fd, ioringOffSQEs, int(sqEntries)*uringSQESize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("io_uring: mapping the entries: %w", err)
	}
	at := func(off int) *uint32 { return (*uint32)(unsafe.Pointer(&u.ring[le(off)])) }
	u.sqTail, u.sqMask = at(sqOffTail), at(sqOffMask)
	u.cqHead, u.cqTail, u.cqMask = at(cqOffHead), at(cqOffTail), at(cqOffMask)
	u.sqArray = unsafe.Pointer(&u.ring[le(sqOffArray)])
	u.cqes = unsafe.Pointer(&u.ring[le(cqOffCQEs)])
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("io_uring: eventfd: %w", err)
	}
	u.ev = os.NewFile(uintptr(efd), "io_uring eventfd")
	e := int32(efd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(u.fd), ioringRegisterEventfd, uintptr(unsafe.Pointer(&e)), 1, 0, 0); errno != 0 {
		return nil, fmt.Errorf("io_uring: registering the eventfd: %w", errno)
	}
	ok = true
	return u, nil
}

// close unmaps the rings and closes the ring and its eventfd.
func (u *uring) close() {
	if u.ev != nil {
		u.ev.Close()
	}
	if u.sqes != nil {
		unix.Munmap(u.sqes)
	}
	if u.ring != nil {
		unix.Munmap(u.ring)
	}
	unix.Close(u.fd)
}

// fdatasync syncs f's data through the ring, as fdatasync(2) would. One
// call at a time: the journal's writer holds its lock (wmu) around it.
func (u *uring) fdatasync(f *os.File) error {
	tail := atomic.LoadUint32(u.sqTail)
	idx := tail & *u.sqMask
	sqe := u.sqes[int(idx)*uringSQESize : int(idx+1)*uringSQESize]
	clear(sqe)
	sqe[0] = ioringOpFsync
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(f.Fd())
	*(*uint32)(unsafe.Pointer(&sqe[28])) = ioringFsyncDatasync
	*(*uint64)(unsafe.Pointer(&sqe[32])) = uint64(tail) // user_data
	*(*uint32)(unsafe.Add(u.sqArray, 4*uintptr(idx))) = idx
	atomic.StoreUint32(u.sqTail, tail+1)
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(u.fd), 1, 0, 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
		if n != 1 {
			return fmt.Errorf("io_uring_enter: %d submitted", n)
		}
		break
	}
	for {
		head := atomic.LoadUint32(u.cqHead)
		if head != atomic.LoadUint32(u.cqTail) {
			cqe := unsafe.Add(u.cqes, cqeSize*uintptr(head&*u.cqMask))
			res := *(*int32)(unsafe.Add(cqe, 8))
			atomic.StoreUint32(u.cqHead, head+1)
			if res < 0 {
				return unix.Errno(-res)
			}
			return nil
		}
		if _, err := u.ev.Read(u.buf[:]); err != nil {
			return fmt.Errorf("io_uring: eventfd: %w", err)
		}
	}
}
