package fastserve

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/web"
)

// Limits are the limits of the HTTP server NewServer makes.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's line and header fields,
	// ReadTimeout the whole request (as net/http's fields of those names).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and header fields; fasthttp
	// reads them into a buffer of this size on each connection that is
	// reading a request.
	MaxHeaderBytes int
	Logger         *slog.Logger
}

// NewServer returns a fasthttp server of h with limits l. A body over
// maxBody, the largest the handler reads, is refused as the handler
// refuses it, 413 body_too_large, before it is read to its end. A
// connection between requests holds no buffer (ReduceMemoryUsage):
// players poll once a TTL and keep their connections open meanwhile, and
// a buffer of MaxHeaderBytes on each would cost 64 KiB a player. fasthttp
// then waits for a request by reading its first byte alone; served on a
// listener of Listener, that wait reads the whole request in one read.
func NewServer(h fasthttp.RequestHandler, maxBody int, l Limits) *fasthttp.Server {
	return &fasthttp.Server{
		Handler: h,
		// fasthttp's ReadTimeout runs from a request's first byte; once
		// its header is read, its body gets what is left of ReadTimeout.
		ReadTimeout: l.ReadHeaderTimeout,
		HeaderReceived: func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
			if h.ContentLength() == 0 { // no body: a steering GET
				return fasthttp.RequestConfig{}
			}
			return fasthttp.RequestConfig{ReadTimeout: max(l.ReadTimeout-l.ReadHeaderTimeout, time.Millisecond)}
		},
		WriteTimeout:          l.WriteTimeout,
		IdleTimeout:           l.IdleTimeout,
		ReadBufferSize:        l.MaxHeaderBytes,
		MaxRequestBodySize:    maxBody,
		NoDefaultServerHeader: true,
		ReduceMemoryUsage:     true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		Logger:                logger{l.Logger},
		ErrorHandler: func(c *fasthttp.RequestCtx, err error) {
			if errors.Is(err, fasthttp.ErrBodyTooLarge) {
				web.Refuse(NewWriter(c), api.Errorf(api.BodyTooLarge, "the body is over the %d bytes any route reads", maxBody))
				c.SetConnectionClose()
				drainBody(c.Conn(), drainTimes*maxBody)
				return
			}
			// The statuses net/http answers these with.
			var timeout interface{ Timeout() bool }
			switch {
			case errors.As(err, new(*fasthttp.ErrSmallBuffer)):
				c.Error("431 Request Header Fields Too Large", http.StatusRequestHeaderFieldsTooLarge)
			case errors.As(err, &timeout) && timeout.Timeout():
				c.Error("408 Request Timeout", http.StatusRequestTimeout)
			default:
				c.Error("400 Bad Request", http.StatusBadRequest)
			}
			c.SetConnectionClose()
		},
	}
}

// drainBody reads and drops what a client still sends of a body refused
// for its size, before the connection is closed: closing a socket with
// unread bytes resets the connection, and the client, still sending, would
// lose the answer that says why. It reads until the client pauses for
// drainPause, or after most bytes (net/http's MaxBytesReader lets a client
// read its 413 the same way).
func drainBody(conn net.Conn, most int) {
	buf := make([]byte, 32<<10)
	for n := 0; n < most; {
		conn.SetReadDeadline(time.Now().Add(drainPause))
		k, err := conn.Read(buf)
		n += k
		if err != nil {
			return
		}
	}
}

const (
	drainPause = 200 * time.Millisecond
	drainTimes = 2 // a refused body is drained up to twice the largest read
)

// logger writes fasthttp's own messages (connections it could not serve)
// as warnings.
type logger struct{ l *slog.Logger }

func (f logger) Printf(format string, args ...any) {
	if f.l != nil {
		f.l.Warn(fmt.Sprintf(format, args...), "from", "fasthttp")
	}
}
