package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/plaudit/plaudit/backup"
)

// The operator's commands over a data directory: thin flag parsing over
// package backup, kept apart from main.go's switch so they move as one.

// backupCmd is `plaudit backup --to DIR` from a running server (--server,
// --key) or a stopped data directory (--data).
func backupCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "directory to write the backup into (absent or empty)")
	serverURL := fs.String("server", "", "back up the running server at this base URL (http://host:port)")
	key := fs.String("key", os.Getenv("PLAUDIT_API_KEY"), "with --server: an admin API key (default $PLAUDIT_API_KEY)")
	data := fs.String("data", "", "back up this stopped data directory instead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to == "" || (*serverURL == "") == (*data == "") {
		return errors.New("usage: plaudit backup --to DIR (--server URL --key KEY | --data DIR)")
	}
	var (
		m   backup.Manifest
		err error
	)
	if *serverURL != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		m, err = backup.Fetch(ctx, http.DefaultClient, *serverURL, *key, *to)
	} else {
		m, err = backup.Offline(*data, *to, version)
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "backup of %d files, %d bytes, taken %s (plaudit %s, pebble format %s), written to %s and verified\n",
		len(m.Files), m.Bytes(), m.Created.Format("2006-01-02T15:04:05Z07:00"), m.Plaudit, m.Pebble, *to)
	return nil
}

// restoreCmd is `plaudit restore --from DIR --data NEWDIR`.
func restoreCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the backup directory")
	data := fs.String("data", "", "the new data directory (absent or empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from == "" || *data == "" {
		return errors.New("usage: plaudit restore --from DIR --data NEWDIR")
	}
	m, r, err := backup.Restore(*from, *data)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(stdout, "restored the backup taken %s into %s: %d files, %d bytes, %d agents, verified\n",
		m.Created.Format("2006-01-02T15:04:05Z07:00"), *data, len(m.Files), m.Bytes(), len(r.Agents))
	return nil
}

// inspectCmd is `plaudit inspect --data DIR [--json]`; corruption is an
// error (exit status 1) after the report.
func inspectCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./data", "the stopped data directory")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := backup.Inspect(*data)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if err := backup.WriteReport(stdout, r, *asJSON); err != nil {
		return err
	}
	if len(r.Problems) > 0 {
		return fmt.Errorf("inspect: %s: %d problems", *data, len(r.Problems))
	}
	return nil
}
