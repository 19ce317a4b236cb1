// Package backup copies a Plaudit data directory, online or offline, and
// restores it.
//
// A backup is a directory: the files of a Pebble checkpoint of the data
// directory (see pebblelog.Store.Checkpoint for what it holds and why it is
// consistent) and plaudit-backup.json, the manifest listing every file with
// its size and SHA-256, the Plaudit version, the Pebble format and the time.
// The manifest is written last, so a directory without one is no backup.
//
// On the wire (the server's POST /v1/admin/backup) a backup is a tar of the
// same files, the manifest last: the sender hashes as it streams, so the
// checkpoint is read once.
package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ManifestName is the manifest's file name in a backup.
const ManifestName = "plaudit-backup.json"

// Format names the backup layout; a manifest of another format is refused.
const Format = "plaudit-backup/1"

var (
	// ErrCorrupt is wrapped when a backup does not match its manifest, or
	// its stream or manifest is malformed.
	ErrCorrupt = errors.New("backup: corrupt")
	// ErrNotEmpty is returned for a destination directory that holds files.
	ErrNotEmpty = errors.New("destination is not empty")
)

// Manifest describes a backup.
type Manifest struct {
	Format  string    `json:"format"`
	Plaudit string    `json:"plaudit_version"`
	Pebble  string    `json:"pebble_format"`
	Created time.Time `json:"created_at"`
	Files   []File    `json:"files"`
}

// File is one file of a backup.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Bytes is the total size of the backup's files.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

func (m Manifest) encode() []byte {
	b, _ := json.MarshalIndent(m, "", "  ") // cannot fail: plain fields
	return append(b, '\n')
}

func decodeManifest(b []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("manifest: %v: %w", err, ErrCorrupt)
	}
	if m.Format != Format {
		return Manifest{}, fmt.Errorf("manifest: format %q, want %q: %w", m.Format, Format, ErrCorrupt)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if err := validName(f.Name); err != nil || seen[f.Name] || f.Size < 0 || len(f.SHA256) != 64 {
			return Manifest{}, fmt.Errorf("manifest: file %q: %w", f.Name, ErrCorrupt)
		}
		seen[f.Name] = true
	}
	return m, nil
}

// validName accepts the flat file names of a Pebble directory: no path
// separators, nothing a tar could use to write outside the destination.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || name == ManifestName ||
		strings.ContainsAny(name, `/\`) || name != filepath.Base(name) {
		return fmt.Errorf("file name %q: %w", name, ErrCorrupt)
	}
	return nil
}

// ReadManifest reads and checks the manifest of the backup in dir.
func ReadManifest(dir string) (Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return Manifest{}, &fs.PathError{Op: "open backup", Path: dir, Err: fs.ErrNotExist}
		}
		if errors.Is(err, os.ErrNotExist) {
			return Manifest{}, fmt.Errorf("%s: no %s (not a backup, or an unfinished one): %w", dir, ManifestName, ErrCorrupt)
		}
		return Manifest{}, err
	}
	m, err := decodeManifest(b)
	if err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", dir, err)
	}
	return m, nil
}

// Verify reads every file the manifest of the backup in dir lists and
// checks its size and SHA-256. Files the manifest does not list are
// ignored (restore does not copy them).
func Verify(dir string) (Manifest, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return Manifest{}, err
	}
	for _, f := range m.Files {
		if err := verifyFile(filepath.Join(dir, f.Name), f); err != nil {
			return Manifest{}, err
		}
	}
	return m, nil
}

func verifyFile(path string, f File) error {
	in, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: missing: %w", path, ErrCorrupt)
		}
		return err
	}
	defer in.Close()
	h := sha256.New()
	n, err := io.Copy(h, in)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return check(path, f, n, h.Sum(nil))
}

func check(name string, want File, size int64, sum []byte) error {
	if size != want.Size {
		return fmt.Errorf("%s: %d bytes, the manifest says %d: %w", name, size, want.Size, ErrCorrupt)
	}
	if got := hex.EncodeToString(sum); got != want.SHA256 {
		return fmt.Errorf("%s: sha256 %s, the manifest says %s: %w", name, got, want.SHA256, ErrCorrupt)
	}
	return nil
}

// emptyDir creates dir if it is absent and refuses it if it holds anything.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s: %w", dir, ErrNotEmpty)
	}
	return nil
}

// clearDir removes everything in dir, a directory this package filled
// from empty: what a failed restore or backup wrote, Pebble's LOCK and the
// restore's marker included.
func clearDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// syncDir makes the directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
