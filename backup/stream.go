package backup

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Source is a store that can be copied while it serves:
// *pebblelog.Store. Its checkpoint is read from the operating system's
// file system.
type Source interface {
	// Checkpoint makes a consistent copy in a new directory and returns it
	// and a func that removes it.
	Checkpoint() (dir string, remove func() error, err error)
	// Format is the store's on-disk format, recorded in the manifest.
	Format() string
}

// Take checkpoints src and returns a func that streams the checkpoint to w
// as a backup tar and then removes it. The checkpoint is made here, so that
// its failure can still be an error answer; stream must then be called
// exactly once (it removes the checkpoint whatever happens to w).
func Take(src Source, version string, now time.Time) (stream func(w io.Writer) error, err error) {
	dir, remove, err := src.Checkpoint()
	if err != nil {
		return nil, err
	}
	m := Manifest{Format: Format, Plaudit: version, Pebble: src.Format(), Created: now.UTC()}
	return func(w io.Writer) error {
		err := Stream(w, dir, m)
		if rerr := remove(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing checkpoint %s: %w", dir, rerr))
		}
		return err
	}, nil
}

// Stream writes the regular files of dir to w as a tar, hashing each as it
// goes, then m with the files listed as the last entry.
func Stream(w io.Writer, dir string, m Manifest) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	m.Files = m.Files[:0]
	for _, e := range entries { // ReadDir sorts by name
		if !e.Type().IsRegular() {
			continue
		}
		f, err := streamFile(tw, filepath.Join(dir, e.Name()), e.Name(), m.Created)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, f)
	}
	b := m.encode()
	if err := tw.WriteHeader(&tar.Header{Name: ManifestName, Mode: 0o644, Size: int64(len(b)), ModTime: m.Created, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	return tw.Close()
}

// streamFile writes one file. Its size is taken before it is read: the
// checkpoint's files do not change, and a file that did would fail the
// tar's length check rather than go out wrong.
func streamFile(tw *tar.Writer, path, name string, at time.Time) (File, error) {
	in, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return File{}, err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: st.Size(), ModTime: at, Typeflag: tar.TypeReg}); err != nil {
		return File{}, err
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(tw, h), in, st.Size()); err != nil {
		return File{}, fmt.Errorf("%s: %w", name, err)
	}
	return File{Name: name, Size: st.Size(), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Receive reads a backup tar from r into dir, which must be absent or
// empty: every file is written and synced, then checked against the
// manifest (the tar's last entry), and the manifest is written last. On
// any error what was written is removed, so dir never holds a backup that
// looks whole and is not.
func Receive(r io.Reader, dir string) (m Manifest, err error) {
	if err := emptyDir(dir); err != nil {
		return Manifest{}, err
	}
	var written []string
	defer func() {
		if err != nil {
			for _, p := range written {
				_ = os.Remove(p)
			}
		}
	}()
	type got struct {
		size int64
		sum  []byte
	}
	files := map[string]got{}
	var manifest []byte
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("reading the backup stream: %v: %w", err, ErrCorrupt)
		}
		if manifest != nil {
			return Manifest{}, fmt.Errorf("entry %q after the manifest: %w", hdr.Name, ErrCorrupt)
		}
		if hdr.Typeflag != tar.TypeReg {
			return Manifest{}, fmt.Errorf("entry %q is not a file: %w", hdr.Name, ErrCorrupt)
		}
		if hdr.Name == ManifestName {
			if manifest, err = io.ReadAll(io.LimitReader(tr, 64<<20)); err != nil {
				return Manifest{}, fmt.Errorf("reading the manifest: %v: %w", err, ErrCorrupt)
			}
			continue
		}
		if err := validName(hdr.Name); err != nil {
			return Manifest{}, err
		}
		if _, dup := files[hdr.Name]; dup {
			return Manifest{}, fmt.Errorf("entry %q twice: %w", hdr.Name, ErrCorrupt)
		}
		path := filepath.Join(dir, hdr.Name)
		written = append(written, path)
		size, sum, err := writeFile(path, tr)
		if err != nil {
			return Manifest{}, err
		}
		files[hdr.Name] = got{size, sum}
	}
	if manifest == nil {
		return Manifest{}, fmt.Errorf("the stream ended before its manifest: %w", ErrCorrupt)
	}
	if m, err = decodeManifest(manifest); err != nil {
		return Manifest{}, err
	}
	if len(m.Files) != len(files) {
		return Manifest{}, fmt.Errorf("the stream holds %d files, the manifest lists %d: %w", len(files), len(m.Files), ErrCorrupt)
	}
	for _, f := range m.Files {
		g, ok := files[f.Name]
		if !ok {
			return Manifest{}, fmt.Errorf("%s: listed but not sent: %w", f.Name, ErrCorrupt)
		}
		if err := check(f.Name, f, g.size, g.sum); err != nil {
			return Manifest{}, err
		}
	}
	if err := syncDir(dir); err != nil {
		return Manifest{}, err
	}
	path := filepath.Join(dir, ManifestName)
	written = append(written, path)
	if _, _, err := writeFile(path, bytes.NewReader(manifest)); err != nil {
		return Manifest{}, err
	}
	return m, syncDir(dir)
}

// writeFile writes r to a new file at path, synced, and returns its size
// and SHA-256.
func writeFile(path string, r io.Reader) (int64, []byte, error) {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, nil, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), r)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	return n, h.Sum(nil), nil
}
