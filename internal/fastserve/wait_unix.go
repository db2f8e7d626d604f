//go:build unix

package fastserve

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// waitConn is a connection whose reads of one byte wait for what arrives
// and keep what they read beyond that byte (held[next:]) for the reads
// that follow.
type waitConn struct {
	net.Conn
	raw  syscall.RawConn
	held *[waitSize]byte // nil when nothing is kept
	next int
	end  int
}

var waitBufs = sync.Pool{New: func() any { return new([waitSize]byte) }}

func waiting(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &waitConn{Conn: c, raw: raw}
}

func (c *waitConn) Read(b []byte) (int, error) {
	if c.held != nil {
		n := copy(b, c.held[c.next:c.end])
		if c.next += n; c.next == c.end {
			waitBufs.Put(c.held)
			c.held = nil
		}
		return n, nil
	}
	if len(b) != 1 {
		return c.Conn.Read(b)
	}
	return c.wait(b)
}

// wait reads what has arrived, waiting (under the connection's read
// deadline) until something has, into a buffer taken once it is there,
// and hands over its first byte. The wait itself is the runtime's, as
// for any read of the connection: the function given to raw.Read is
// called at once, and again each time the connection becomes readable,
// until it reports done.
func (c *waitConn) wait(b []byte) (int, error) {
	var (
		buf  *[waitSize]byte
		n    int
		rerr error
	)
	err := c.raw.Read(func(fd uintptr) bool {
		buf = waitBufs.Get().(*[waitSize]byte)
		for {
			n, rerr = syscall.Read(int(fd), buf[:])
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			waitBufs.Put(buf)
			buf = nil
			return false
		}
		return true
	})
	if err != nil { // the deadline passed, or the connection was closed
		return 0, err
	}
	switch {
	case rerr != nil:
		waitBufs.Put(buf)
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	case n <= 0:
		waitBufs.Put(buf)
		return 0, io.EOF
	case n == 1:
		b[0] = buf[0]
		waitBufs.Put(buf)
		return 1, nil
	}
	b[0] = buf[0]
	c.held, c.next, c.end = buf, 1, n
	return 1, nil
}
