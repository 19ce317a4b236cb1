package api

import (
	"fmt"

	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// Workspaces and API keys (SPEC §1).

// enterWorkspace makes the call act in ws: 404 if there is no such
// workspace (403 for a key that could not see it anyway), 403 if the key
// may not use it.
func (c *call) enterWorkspace(ws string) error {
	if _, ok := c.s.tenancy.Workspace(ws); !ok {
		if !c.p.Admin {
			return fmt.Errorf("workspace %s: %w", ws, tenancy.ErrForbidden)
		}
		return notFound("workspace", ws)
	}
	if !c.p.CanUse(ws) {
		return fmt.Errorf("workspace %s: %w", ws, tenancy.ErrForbidden)
	}
	c.ws = ws
	return nil
}

func (c *call) listWorkspaces() (result, error) {
	return ok(appendItems(nil, c.s.tenancy.Workspaces(c.p), appendWorkspace))
}

func (c *call) createWorkspace() (result, error) {
	var name string
	if err := parseBody(c.req.Body, strictName(&name)); err != nil {
		return result{}, err
	}
	ws, err := c.s.tenancy.CreateWorkspace(c.p, name)
	if err != nil {
		return result{}, err
	}
	return created(appendWorkspace(nil, ws))
}

// strictName reads a workspace's or a key's body, {"name"}: the routes
// under /v1/workspaces reject unknown fields, as seed 004's door does.
func strictName(name *string) func(b *body) error {
	return func(b *body) error {
		b.strict("name")
		*name = b.str("name", true)
		return nil
	}
}

func (c *call) createKey() (result, error) {
	var name string
	if err := parseBody(c.req.Body, strictName(&name)); err != nil {
		return result{}, err
	}
	p, secret, err := c.s.tenancy.CreateKey(c.p, c.ws, name)
	if err != nil {
		return result{}, err
	}
	// The secret is shown once (SPEC §1): an Idempotency-Key replay of this
	// call answers the same record with "key": null.
	return result{status: 201, body: appendKey(nil, p, secret), record: appendKey(nil, p, "")}, nil
}

func (c *call) listKeys() (result, error) {
	keys, err := c.s.tenancy.Keys(c.p, c.ws)
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, keys, func(b []byte, p tenancy.Principal) []byte { return appendKey(b, p, "") }))
}

func (c *call) revokeKey() (result, error) {
	p, err := c.s.tenancy.RevokeKey(c.p, c.ws, c.req.Target.Key)
	if err != nil {
		return result{}, err
	}
	return ok(appendKey(nil, p, ""))
}

// appendKey renders an API key; an empty secret renders as null.
func appendKey(b []byte, p tenancy.Principal, secret string) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, p.KeyID)
	b = jsonw.Key(b, "key")
	b = jsonw.StringOrNull(b, secret)
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, p.Name)
	b = jsonw.Key(b, "workspace_id")
	b = jsonw.String(b, p.Home)
	b = jsonw.Key(b, "admin")
	b = jsonw.Bool(b, p.Admin)
	b = jsonw.Key(b, "profile")
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, p.ProfileID)
	b = jsonw.Key(b, "type")
	b = jsonw.String(b, tenancy.ProfileType)
	b = append(b, '}')
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, p.CreatedAt)
	if !p.RevokedAt.IsZero() {
		b = jsonw.Key(b, "revoked_at")
		b = jsonw.Time(b, p.RevokedAt)
	}
	// When the key last authenticated, to about a second (null: never);
	// see tenancy's usage.go for how it is kept.
	b = jsonw.Key(b, "last_used_at")
	if at := p.LastUsed(); at.IsZero() {
		b = append(b, "null"...)
	} else {
		b = jsonw.Time(b, at)
	}
	return append(b, '}')
}
