package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/plaudit/plaudit/persist/pebblelog"
)

// Path is the route of the server's backup endpoint.
const Path = "/v1/admin/backup"

// Fetch asks the server at baseURL (http://host:port) for a backup,
// authenticated with an admin key, receives it into dir (absent or empty)
// and checks it (see Check).
func Fetch(ctx context.Context, client *http.Client, baseURL, key, dir string) (Manifest, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(baseURL, "/")+Path, nil)
	if err != nil {
		return Manifest{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return Manifest{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		var e struct {
			Error struct{ Message string }
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message // Plaudit's error body
		}
		return Manifest{}, fmt.Errorf("%s answered %s: %s", baseURL, resp.Status, msg)
	}
	if _, err := Receive(resp.Body, dir); err != nil {
		return Manifest{}, err
	}
	return checkOrClear(dir)
}

// Offline backs up the data directory data of a stopped server into dir
// (absent or empty), and checks it (see Check). It opens the store as the
// server would, so it fails while a server holds the directory.
func Offline(data, dir, version string) (Manifest, error) {
	if _, err := os.Stat(data); err != nil {
		return Manifest{}, err // Open would create an empty store
	}
	s, err := pebblelog.Open(data, pebblelog.Options{BallastSize: -1})
	if errors.Is(err, pebblelog.ErrLocked) {
		return Manifest{}, fmt.Errorf("%w (is a server running on it? back it up with --server)", err)
	}
	if err != nil {
		return Manifest{}, err
	}
	stream, err := Take(s, version, time.Now())
	if err != nil {
		return Manifest{}, errors.Join(err, s.Close())
	}
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		err := stream(pw)
		pw.CloseWithError(err)
		sent <- err
	}()
	_, err = Receive(pr, dir)
	pr.CloseWithError(errors.New("receive stopped")) // unblocks the sender if Receive failed
	if serr := <-sent; err == nil && serr != nil {
		err = serr
	}
	if cerr := s.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return Manifest{}, err
	}
	m, err := checkOrClear(dir)
	if err != nil {
		// The copy is what is checked; what fails it came from data.
		return Manifest{}, fmt.Errorf("the copy of %s fails its check: %w", data, err)
	}
	return m, nil
}

// checkOrClear is Check of a backup just received into dir, which is
// emptied when it fails: a backup that does not check out must not look
// like one that does.
func checkOrClear(dir string) (Manifest, error) {
	m, err := Check(dir)
	if err != nil {
		clearDir(dir)
	}
	return m, err
}

// Check verifies the backup in dir: every file against the manifest, read
// back from the disk, then the files as a store (Inspect: every block,
// record and snapshot checksum). Inspect's open leaves Pebble's LOCK file,
// which is removed so that the backup holds its manifest's files only.
func Check(dir string) (Manifest, error) {
	m, err := Verify(dir)
	if err != nil {
		return Manifest{}, err
	}
	r, err := Inspect(dir)
	if rerr := os.Remove(filepath.Join(dir, "LOCK")); err == nil && rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	if err != nil {
		return Manifest{}, err
	}
	if err := r.Err(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}
