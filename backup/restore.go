package backup

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// Restore makes data, which must be absent or empty, a data directory
// holding the backup in from: it checks every file against the manifest
// before writing anything, copies them (synced, each hashed again as it is
// copied), and then inspects the result (see Inspect). A data directory
// restored this way starts and answers every read as the original did at
// the backup's point. On error what was written is removed.
func Restore(from, data string) (m Manifest, report *pebblelog.Report, err error) {
	if m, err = Verify(from); err != nil {
		return Manifest{}, nil, err
	}
	if err := emptyDir(data); err != nil {
		return Manifest{}, nil, err
	}
	var written []string
	defer func() {
		if err != nil {
			for _, p := range written {
				_ = os.Remove(p)
			}
		}
	}()
	for _, f := range m.Files {
		in, err := os.Open(filepath.Join(from, f.Name))
		if err != nil {
			return Manifest{}, nil, err
		}
		path := filepath.Join(data, f.Name)
		written = append(written, path)
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
		return Manifest{}, nil, err
	}
	// Inspect's open leaves Pebble's lock file, which is recreated at start.
	written = append(written, filepath.Join(data, "LOCK"))
	if err := report.Err(); err != nil {
		return Manifest{}, report, fmt.Errorf("restored %s: %w", data, err)
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
