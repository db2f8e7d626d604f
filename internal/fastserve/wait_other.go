//go:build !unix

package fastserve

import "net"

// waiting leaves c as it is where the system's reads are not Unix's.
func waiting(c net.Conn) net.Conn { return c }
