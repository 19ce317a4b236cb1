package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/plaudit/plaudit/backup"
)

// The operator's commands over a data directory: thin flag parsing over
// package backup.

// backupCmd is `plaudit backup --to DIR` from a running server (--server,
// --key) or a stopped data directory (--data).
type backupCmd struct {
	To     string `required:"" placeholder:"DIR" help:"Directory to write the backup into (absent or empty)."`
	Server string `placeholder:"URL" help:"Back up the running server at this base URL (http://host:port; default $PLAUDIT_SERVER unless --data is given). One of --server and --data."`
	Key    string `env:"PLAUDIT_KEY,PLAUDIT_API_KEY" placeholder:"KEY" help:"With --server: an admin API key."`
	Data   string `placeholder:"DIR" help:"Back up this stopped data directory instead. One of --server and --data."`
}

func (c *backupCmd) Run(con *console) error {
	var (
		m   backup.Manifest
		err error
	)
	// $PLAUDIT_SERVER, which the keys commands read too, stands for
	// --server only when neither flag is given: a flag on the command line
	// wins over the environment.
	switch {
	case c.Server != "" && c.Data != "":
		return errors.New("backup: --server and --data can't be used together")
	case c.Server == "" && c.Data == "":
		if c.Server = os.Getenv("PLAUDIT_SERVER"); c.Server == "" {
			return errors.New("backup: one of --server (or $PLAUDIT_SERVER) and --data is needed")
		}
	}
	if c.Server != "" {
		if c.Key == "" {
			return errors.New("backup: --server needs --key, an admin API key (or $PLAUDIT_KEY)")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		m, err = backup.Fetch(ctx, http.DefaultClient, c.Server, c.Key, c.To)
	} else {
		m, err = backup.Offline(c.Data, c.To, version)
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	_, err = fmt.Fprintf(con.Out, "backup of %d files, %d bytes, taken %s (plaudit %s, pebble format %s), written to %s and verified\n",
		len(m.Files), m.Bytes(), m.Created.Format("2006-01-02T15:04:05Z07:00"), m.Plaudit, m.Pebble, c.To)
	return err
}

// restoreCmd is `plaudit restore --from DIR --data NEWDIR`.
type restoreCmd struct {
	From string `required:"" placeholder:"DIR" help:"The backup directory."`
	Data string `required:"" placeholder:"NEWDIR" help:"The new data directory (absent or empty)."`
}

func (c *restoreCmd) Run(con *console) error {
	m, r, err := backup.Restore(c.From, c.Data)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	_, err = fmt.Fprintf(con.Out, "restored the backup taken %s into %s: %d files, %d bytes, %d agents, verified\n",
		m.Created.Format("2006-01-02T15:04:05Z07:00"), c.Data, len(m.Files), m.Bytes(), len(r.Agents))
	return err
}

// inspectCmd is `plaudit inspect --data DIR [--json]`; corruption is an
// error (exit status 1) after the report.
type inspectCmd struct {
	Data string `default:"./data" env:"PLAUDIT_DATA" placeholder:"DIR" help:"The stopped data directory."`
	JSON bool   `name:"json" help:"Write the report as JSON."`
}

func (c *inspectCmd) Run(con *console) error {
	r, err := backup.InspectDataDir(c.Data)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if err := backup.WriteReport(con.Out, r, c.JSON); err != nil {
		return err
	}
	if len(r.Problems) > 0 {
		return fmt.Errorf("inspect: %s: %d problems", c.Data, len(r.Problems))
	}
	return nil
}
