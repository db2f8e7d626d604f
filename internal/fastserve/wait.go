package fastserve

import "net"

// Listener returns ln for a server of NewServer, its connections read so
// that waiting for a request costs one read of the system, not two.
//
// A server of NewServer holds no buffer on a connection between requests
// (ReduceMemoryUsage), so it waits for a request by reading its first
// byte alone, and then reads the rest into a buffer it takes from a pool:
// two reads a request, where a server holding its buffers makes one. On
// a connection of ln the read of that one byte reads what has arrived
// into a buffer of a pool instead, hands the byte over and keeps the rest
// for the read that follows. The buffer is taken only once bytes have
// arrived, so an idle connection still holds none (waitSize).
//
// ln's connections should be plain TCP: under TLS the first byte is read
// from a record tls.Conn has read and decrypted whole, and this gains
// nothing. A connection on which the system's own reads are not open
// (syscall.Conn) is left as it is.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return waiting(c), nil
}

// waitSize is the most a wait reads: a player's steering GET, its line
// and header fields, is some hundreds of bytes; what a wait does not
// read the read after it reads, into fasthttp's buffer.
const waitSize = 2048
