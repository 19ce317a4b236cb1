package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// keysCmd is `plaudit keys`: the API keys of a running server, through
// its HTTP API (GET/POST /v1/workspaces/{ws}/api-keys, DELETE …/{id}), as
// any client would manage them; it never opens the data directory.
type keysCmd struct {
	Server    string `default:"http://127.0.0.1:8080" env:"PLAUDIT_SERVER" placeholder:"URL" help:"Base URL of the running server (${default})."`
	Key       string `required:"" env:"PLAUDIT_KEY,PLAUDIT_API_KEY" placeholder:"KEY" help:"An API key that may act on the workspace (an admin key for every workspace)."`
	Workspace string `short:"w" default:"default" env:"PLAUDIT_WORKSPACE" placeholder:"WS" help:"The id of the workspace whose keys these are (ws_…, or default)."`
	JSON      bool   `name:"json" help:"Print the server's JSON answer instead of a table."`

	List   keysListCmd   `cmd:"" help:"List the workspace's keys, revoked ones included, with their last use (no secrets)."`
	Create keysCreateCmd `cmd:"" help:"Create a key; its secret is printed once."`
	Revoke keysRevokeCmd `cmd:"" help:"Revoke a key: it authenticates no more, and its open NATS connections are closed."`
}

type keysListCmd struct{}

func (keysListCmd) Run(k *keysCmd, con *console) error {
	body, err := k.call("GET", "", nil)
	if err != nil {
		return err
	}
	if k.JSON {
		return writeJSON(con.Out, body)
	}
	var list struct{ Items []apiKey }
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("keys: the server's answer: %w", err)
	}
	return writeKeys(con.Out, list.Items)
}

type keysCreateCmd struct {
	Name string `arg:"" help:"A name for the key (who or what uses it)."`
}

func (c *keysCreateCmd) Run(k *keysCmd, con *console) error {
	req, _ := json.Marshal(map[string]string{"name": c.Name})
	body, err := k.call("POST", "", req)
	if err != nil {
		return err
	}
	if k.JSON {
		return writeJSON(con.Out, body)
	}
	var key apiKey
	if err := json.Unmarshal(body, &key); err != nil {
		return fmt.Errorf("keys: the server's answer: %w", err)
	}
	if err := writeKeys(con.Out, []apiKey{key}); err != nil {
		return err
	}
	_, err = fmt.Fprintf(con.Out, "\nkey (shown once, keep it): %s\n", key.Key)
	return err
}

type keysRevokeCmd struct {
	ID string `arg:"" name:"key-id" help:"The key's id (key_…), as keys list shows it."`
}

func (c *keysRevokeCmd) Run(k *keysCmd, con *console) error {
	// Whether it leaves no admin key is read first: once the caller's own
	// key is revoked, it can read nothing.
	othersAdmin := -1 // unknown
	if body, err := k.call("GET", "", nil); err == nil {
		var list struct{ Items []apiKey }
		if json.Unmarshal(body, &list) == nil {
			othersAdmin = 0
			for _, key := range list.Items {
				if key.Admin && key.RevokedAt == nil && key.ID != c.ID {
					othersAdmin++
				}
			}
		}
	}
	body, err := k.call("DELETE", "/"+url.PathEscape(c.ID), nil)
	if err != nil {
		return err
	}
	var revoked apiKey
	if json.Unmarshal(body, &revoked) == nil && revoked.Admin && othersAdmin == 0 {
		fmt.Fprintln(con.Err, "keys: that was the last admin key: no key can create workspaces or act on every workspace now. "+
			"Start the server once with a new PLAUDIT_BOOTSTRAP_KEY (16 characters or more) to add one.")
	}
	if k.JSON {
		return writeJSON(con.Out, body)
	}
	var key apiKey
	if err := json.Unmarshal(body, &key); err != nil {
		return fmt.Errorf("keys: the server's answer: %w", err)
	}
	return writeKeys(con.Out, []apiKey{key})
}

// apiKey is the API's rendering of a key (transport/api appendKey).
type apiKey struct {
	ID         string     `json:"id"`
	Key        string     `json:"key"` // the secret: only in create's answer
	Name       string     `json:"name"`
	Admin      bool       `json:"admin"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// call sends one request to the workspace's api-keys path and returns the
// answer's body, or an error with the server's message.
func (k *keysCmd) call(method, sub string, body []byte) ([]byte, error) {
	u := strings.TrimRight(k.Server, "/") + "/v1/workspaces/" + url.PathEscape(k.Workspace) + "/api-keys" + sub
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+k.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("keys: %s %s: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		// The /v1 paths answer errors as {code, message} (SPEC §1).
		var e struct{ Message string }
		if json.Unmarshal(out, &e) == nil && e.Message != "" {
			return nil, fmt.Errorf("keys: %s %s: %s: %s", method, u, resp.Status, e.Message)
		}
		return nil, fmt.Errorf("keys: %s %s: %s", method, u, resp.Status)
	}
	return out, nil
}

// writeKeys prints keys as a table, times in UTC to the second.
func writeKeys(w io.Writer, keys []apiKey) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tCREATED\tLAST USED\tREVOKED")
	for _, k := range keys {
		role := "workspace"
		if k.Admin {
			role = "admin"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, cell(k.Name), role, stamp(&k.CreatedAt, "-"),
			stamp(k.LastUsedAt, "never"), stamp(k.RevokedAt, "-"))
	}
	return tw.Flush()
}

// cell is s as a table shows it: quoted, with escapes, when it holds a
// character that is not printable (a tab, a newline or an escape sequence
// in a name stored before names were checked would shift or forge rows).
func cell(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func stamp(t *time.Time, none string) string {
	if t == nil || t.IsZero() {
		return none
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// writeJSON prints the server's answer as it came, one line.
func writeJSON(w io.Writer, body []byte) error {
	_, err := fmt.Fprintf(w, "%s\n", bytes.TrimSpace(body))
	return err
}
