package httpdoor

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestBackupStreamOutlastsWriteTimeout: a backup body read slowly but
// steadily arrives whole even when it takes longer than WriteTimeout; a
// reader that stops reading is cut off WriteTimeout after its last
// progress, and the stream func returns (so the server can remove its
// checkpoint).
func TestBackupStreamOutlastsWriteTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	tests := []struct {
		name   string
		chunks int // the body's 64 KiB chunks; 0: without end
		read   func(t *testing.T, body io.Reader) error
	}{
		{"slow and steady", 500, func(t *testing.T, body io.Reader) error {
			buf := make([]byte, 64<<10)
			n := 0
			start := time.Now()
			for {
				m, err := body.Read(buf)
				n += m
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				time.Sleep(time.Millisecond)
			}
			if n != 500*len(chunk) {
				return fmt.Errorf("read %d bytes, want %d", n, 500*len(chunk))
			}
			if took := time.Since(start); took < 2*timeout {
				return fmt.Errorf("took %v: not longer than the write timeout, proves nothing", took)
			}
			return nil
		}},
		{"stalled", 0, func(t *testing.T, body io.Reader) error {
			_, err := body.Read(make([]byte, 10))
			return err // then read no more
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ended := make(chan error, 1)
			e := newTCPDoorEnv(t, Config{WriteTimeout: timeout, Backup: func() (func(io.Writer) error, error) {
				return func(w io.Writer) error {
					var err error
					for i := 0; err == nil && (tt.chunks == 0 || i < tt.chunks); i++ {
						_, err = w.Write(chunk)
					}
					ended <- err
					return err
				}, nil
			}})
			conn, err := e.dial()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 0\r\n\r\n", backupPath, adminKey)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-tar" {
				t.Fatalf("%s %s", resp.Status, resp.Header)
			}
			if err := tt.read(t, resp.Body); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-ended:
				if (tt.chunks == 0) != (err != nil) {
					t.Fatalf("stream ended with %v", err)
				}
			case <-time.After(10 * timeout):
				t.Fatal("the stream did not end")
			}
		})
	}
}

// TestBackupChecksItsIdempotencyKey: a malformed Idempotency-Key is 400 on
// the backup's POST as on every other, before a backup is taken.
func TestBackupChecksItsIdempotencyKey(t *testing.T) {
	taken := 0
	e := newDoorEnv(t, Config{Backup: func() (func(io.Writer) error, error) {
		taken++
		return func(w io.Writer) error { _, err := io.WriteString(w, "tar"); return err }, nil
	}}, true)
	expectError(t, e.do(t, adminKey, "POST", backupPath, "", map[string]string{"Idempotency-Key": "two words"}),
		400, jsonShape, "invalid_request", "Idempotency-Key")
	req, _ := http.NewRequest("POST", "http://plaudit.test"+backupPath, nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	req.Header.Set("Idempotency-Key", "nightly-1")
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("backup with a key: %s", resp.Status)
	}
	if taken != 1 {
		t.Errorf("%d backups taken, want 1 (the malformed key's none)", taken)
	}
}
