package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// Restore makes data, which must be absent or empty, a data directory
// holding the backup in from: it checks every file against the manifest
// before writing anything, copies them (synced, each hashed again as it is
// copied), and then inspects the result (see Inspect). A data directory
// restored this way starts and answers every read as the original did at
// the backup's point. On error what was written is removed. Until the
// restore is complete, data holds pebblelog.RestoreMarker, written first
// and removed last, so a restore cut short (a kill, a crash) leaves a
// directory the server refuses rather than one it would start afresh.
func Restore(from, data string) (m Manifest, report *pebblelog.Report, err error) {
	if m, err = Verify(from); err != nil {
		return Manifest{}, nil, err
	}
	if err := emptyDir(data); err != nil {
		return Manifest{}, nil, err
	}
	defer func() {
		if err != nil {
			clearDir(data)
		}
	}()
	marker := filepath.Join(data, pebblelog.RestoreMarker)
	if _, _, err := writeFile(marker, strings.NewReader("a restore into this directory has not finished\n")); err != nil {
		return Manifest{}, nil, err
	}
	if err := syncDir(data); err != nil {
		return Manifest{}, nil, err
	}
	for _, f := range m.Files {
		in, err := os.Open(filepath.Join(from, f.Name))
		if err != nil {
			return Manifest{}, nil, err
		}
		path := filepath.Join(data, f.Name)
		size, sum, err := writeFile(path, in)
		in.Close()
		if err != nil {
			return Manifest{}, nil, err
		}
		// Checked again: the file could have changed since Verify read it.
		if err := check(path, f, size, sum); err != nil {
			return Manifest{}, nil, err
		}
	}
	if err := syncDir(data); err != nil {
		return Manifest{}, nil, err
	}
	if report, err = Inspect(data); err != nil {
		return Manifest{}, nil, fmt.Errorf("restored %s: %w", data, err)
	}
	if err := report.Err(); err != nil {
		return Manifest{}, report, fmt.Errorf("restored %s: %w", data, err)
	}
	// Inspect's open leaves Pebble's lock file, which is recreated at start.
	if err := os.Remove(filepath.Join(data, "LOCK")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Manifest{}, nil, err
	}
	if err := os.Remove(marker); err != nil {
		return Manifest{}, nil, err
	}
	if err := syncDir(data); err != nil {
		return Manifest{}, nil, err
	}
	return m, report, nil
}

// Inspect inspects the stopped data directory dir (pebblelog.Inspect) and
// also decodes every event and snapshot with the engine's codec.
func Inspect(dir string) (*pebblelog.Report, error) {
	return pebblelog.Inspect(dir, pebblelog.InspectOptions{
		CheckEvent: func(b []byte) error { _, err := engine.DecodeEvent(b); return err },
		CheckState: func(b []byte) error { _, err := engine.DecodeState(b); return err },
	})
}
