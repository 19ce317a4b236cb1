package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxAnswer bounds an answer's body as read; the server's own answers stay
// far below it (a version summary lists at most 1000 rewards).
const maxAnswer = 64 << 20

// NewHTTP returns a client of the HTTP door at baseURL (e.g.
// "http://localhost:8080") that authenticates with key.
func NewHTTP(baseURL, key string, opts ...Option) *Client {
	o := defaults()
	for _, f := range opts {
		f(&o)
	}
	hc := o.httpClient
	owned := hc == nil
	if owned {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Client{door: &httpDoor{base: strings.TrimRight(baseURL, "/"), key: key, hc: hc, owned: owned}, opts: o}
}

type httpDoor struct {
	base, key string
	hc        *http.Client
	owned     bool
}

func (d *httpDoor) serves(*call) bool { return true }

func (d *httpDoor) send(ctx context.Context, cl *call, body []byte, key string) (answer, error) {
	u := d.base + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	if cl.write && len(cl.members) > 0 {
		body = cl.withMembers(body) // the bytes NATS sends (see withMembers)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, u, rd)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if cl.wait > 0 {
		req.Header.Set("Prefer", "wait="+strconv.Itoa(int(cl.wait/time.Second)))
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return answer{}, fmt.Errorf("read answer: %w", err)
	}
	if len(b) > maxAnswer {
		return answer{}, fmt.Errorf("answer over %d bytes", maxAnswer)
	}
	return answer{status: resp.StatusCode, body: b, requestID: resp.Header.Get("X-Request-Id"),
		retryAfter: retryAfter(resp.Header.Get("Retry-After"))}, nil
}

func (d *httpDoor) close() error {
	if d.owned {
		d.hc.CloseIdleConnections()
	}
	return nil
}

// retryAfter reads Retry-After in seconds (the form Plaudit sends); an
// HTTP date or garbage is zero.
func retryAfter(s string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
