package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// The NATS door's error headers (nats.go micro's ErrorCodeHeader and
// ErrorHeader).
const (
	natsErrorCode = "Nats-Service-Error-Code"
	natsError     = "Nats-Service-Error"
)

// NewNATS returns a client of the NATS door over nc, a connection that
// authenticated with a Plaudit API key as its token (nats.Token(key)):
// the connection's key authenticates every request. The caller keeps
// owning nc; Close leaves it open.
func NewNATS(nc *nats.Conn, opts ...Option) *Client {
	o := defaults()
	for _, f := range opts {
		f(&o)
	}
	return &Client{door: &natsDoor{nc: nc, ws: o.workspace, auth: o.natsAuth}, opts: o}
}

// DialNATS connects to the NATS server at url with key as the token and
// returns a client of the NATS door that owns the connection (Close closes
// it). nats.go reconnects by itself; a request whose reply a reconnect
// lost is retried after AttemptTimeout.
func DialNATS(url, key string, opts ...Option) (*Client, error) {
	nc, err := nats.Connect(url, nats.Token(key), nats.Name("plaudit-client"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("plaudit client: connect %s: %w", url, err)
	}
	c := NewNATS(nc, opts...)
	c.door.(*natsDoor).owned = true
	return c, nil
}

// NATSAuthorization makes a NATS client send key in an Authorization
// header on every request: it must be a key of the connection's workspace,
// and the request then acts as that key rather than the connection's.
func NATSAuthorization(key string) Option {
	return func(o *options) { o.natsAuth = "Bearer " + key }
}

type natsDoor struct {
	nc    *nats.Conn
	ws    string
	auth  string
	owned bool
}

func (d *natsDoor) serves(cl *call) bool { return cl.op != "" }

func (d *natsDoor) send(ctx context.Context, cl *call, body []byte, key string) (answer, error) {
	for _, t := range [...]struct{ what, token string }{{"workspace", d.ws}, {"agent", cl.agent}} {
		if !subjectToken(t.token) {
			return answer{}, fmt.Errorf("%s: %s %q is not one NATS subject token: %w", cl.describe(), t.what, t.token, ErrUnsupported)
		}
	}
	msg := nats.NewMsg("plaudit.v1." + d.ws + "." + cl.agent + "." + cl.op)
	msg.Data = cl.withMembers(body)
	if key != "" {
		msg.Header.Set("Idempotency-Key", key)
	}
	if cl.wait > 0 {
		msg.Header.Set("Prefer", "wait="+strconv.Itoa(int(cl.wait/time.Second)))
	}
	if d.auth != "" {
		msg.Header.Set("Authorization", d.auth)
	}
	if err := d.refused(cl); err != nil {
		return answer{}, err
	}
	rep, err := d.nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrMaxPayload) {
		// Refused before it left, as the door refuses a body over
		// --max-body: the same answer, not a transport error to retry.
		return answer{}, &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Message: fmt.Sprintf("%s: the request (%d bytes) is over the connection's max_payload (%d)", cl.describe(), len(msg.Data), d.nc.MaxPayload())}
	}
	if err != nil {
		if refused := d.refused(cl); refused != nil {
			return answer{}, refused
		}
		return answer{}, err
	}
	a := answer{status: 200, body: rep.Data, requestID: rep.Header.Get("X-Request-Id"),
		retryAfter: retryAfter(rep.Header.Get("Retry-After"))}
	if code := rep.Header.Get(natsErrorCode); code != "" {
		n, err := strconv.Atoi(code)
		if err != nil {
			return answer{}, fmt.Errorf("reply with %s %q", natsErrorCode, code)
		}
		a.status, a.message = n, rep.Header.Get(natsError)
	}
	return a, nil
}

// refused is the 401 of a connection the server no longer lets in: a
// revoked key loses its connections, and their reconnects are refused as an
// authorization violation (nats.go closes the connection after the second).
// The HTTP door answers such a key 401; a retry cannot cure it.
func (d *natsDoor) refused(cl *call) error {
	if d.nc.IsConnected() {
		return nil
	}
	err := d.nc.LastError()
	if !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthRevoked) && !errors.Is(err, nats.ErrAuthExpired) {
		return nil
	}
	return &Error{Status: http.StatusUnauthorized, Code: "unauthenticated",
		Message: fmt.Sprintf("%s: the NATS server refuses the connection's key (%v)", cl.describe(), err)}
}

func (d *natsDoor) close() error {
	if d.owned {
		d.nc.Close()
	}
	return nil
}

// subjectToken reports whether s can be one literal token of a subject:
// not empty, not a wildcard ("*", ">"), without '.' or white space.
func subjectToken(s string) bool {
	return s != "" && s != "*" && s != ">" && !strings.ContainsAny(s, ". \t\r\n")
}
