// Package tenancy holds who may do what: the installation's account, its
// workspaces and API keys. Keys are random, shown once, stored only as a
// SHA-256 hash and compared in constant time; a revoked key stays on record
// (so it is never re-created) and authenticates no more.
package tenancy

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/persist"
)

// Errors of authentication and authorisation.
var (
	ErrUnauthenticated = errors.New("missing or unknown API key")
	ErrForbidden       = errors.New("the key may not act on this workspace")
)

// errBadKeyHash: a stored key record's name is not the hex SHA-256 of a
// secret (a damaged store); Open refuses it rather than guess.
var errBadKeyHash = errors.New("the stored key hash is not 64 hex digits")

// DefaultWorkspace is the id and name of the workspace made at first start.
const DefaultWorkspace = "default"

// ProfileType is the type of every key's profile.
const ProfileType = "PROFILE_TYPE_API_KEY"

// Principal is who a request acts as: one API key.
type Principal struct {
	KeyID     string
	ProfileID string
	Name      string
	Home      string // the workspace of paths without one
	Admin     bool   // may act on every workspace
	CreatedAt time.Time
	RevokedAt time.Time // zero while the key is in use
	hash      [sha256.Size]byte
	use       *usage // shared by every copy of the principal; see LastUsed
}

// Store is what the tenancy keeps on disk: a few small records, written
// through (synced) before the tenancy changes in memory.
type Store interface {
	Get(key []byte) ([]byte, error) // persist.ErrNotFound when absent
	Put(kvs ...persist.KV) error
	Scan(prefix []byte, fn func(key, value []byte) error) error
}

// CanUse reports whether p may act on workspace ws.
func (p Principal) CanUse(ws string) bool { return p.Admin || p.Home == ws }

// Workspace is a tenant.
type Workspace struct {
	ID, Name  string
	CreatedAt time.Time
}

// Directory keys of the tenancy records.
const (
	accountKey = "tenancy/account"
	wsPrefix   = "tenancy/ws/"
	keyPrefix  = "tenancy/key/"
	usedPrefix = "tenancy/used/" // + key id: the key's last use, saved coarsely (usage.go)
)

// Tenancy is the set of workspaces and keys, kept in memory and written
// through to the store before it changes.
type Tenancy struct {
	store Store
	now   func() time.Time

	// writeMu serialises the writes, across their store write; mu guards
	// what is kept in memory and is never held across a store write (a
	// cluster's directory shows each write to Apply before Put returns).
	writeMu    sync.Mutex
	rnd        *mrand.Rand // for ids; guarded by writeMu
	mu         sync.RWMutex
	account    string
	workspaces map[string]Workspace
	keys       map[[sha256.Size]byte]Principal // every key ever made, revoked ones too
	byID       map[string][sha256.Size]byte    // key id → hash
	byProfile  map[string][sha256.Size]byte    // profile id → hash
	onRevoke   []func(Principal)

	saveMu sync.Mutex // serialises SaveUsage

	// catchUp, in a cluster, brings the directory up to date before a key
	// is found unknown (CatchUpOnMiss). catchMu guards the calls' count:
	// started, done, whether one runs.
	catchUp                 func() error
	catchMu                 sync.Mutex
	catchCond               *sync.Cond
	catchStarted, catchDone uint64
	catchRunning            bool
}

// OnRevoke registers fn to run after a key is revoked, e.g. to close the
// key's open connections. Register before serving.
func (t *Tenancy) OnRevoke(fn func(Principal)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onRevoke = append(t.onRevoke, fn)
}

// Open loads the tenancy and bootstraps it (Load, then Bootstrap).
func Open(store Store, bootstrapKey string, now func() time.Time) (*Tenancy, string, error) {
	t, err := Load(store, now)
	if err != nil {
		return nil, "", err
	}
	shown, err := t.Bootstrap(bootstrapKey)
	if err != nil {
		return nil, "", err
	}
	return t, shown, nil
}

// Load reads the tenancy from store and writes nothing. A store never
// bootstrapped loads empty: no account, and no key authenticates until
// Bootstrap.
func Load(store Store, now func() time.Time) (*Tenancy, error) {
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	t := &Tenancy{store: store, now: now, workspaces: map[string]Workspace{},
		keys: map[[sha256.Size]byte]Principal{}, byID: map[string][sha256.Size]byte{},
		byProfile: map[string][sha256.Size]byte{}, rnd: mrand.New(mrand.NewChaCha8(seed))}
	if err := t.load(); err != nil {
		return nil, err
	}
	return t, nil
}

// Bootstrap makes a store that Load found empty usable: the account, the
// default workspace and an admin key — bootstrapKey if set, else a random
// one — in one synced write, so a crash leaves all of them or none. It
// returns the admin key when it made a random one now, "" otherwise.
//
// The server calls it only once its doors listen: a start that fails
// before (a port taken) then leaves a data directory that the next start
// bootstraps afresh, instead of one whose only admin key was never shown.
//
// On a bootstrapped store it adds bootstrapKey, if set and unknown, as an
// admin key: scripts that always pass it keep working, and it is the way
// back into a data directory whose admin key is lost. A revoked one stays
// revoked.
func (t *Tenancy) Bootstrap(bootstrapKey string) (string, error) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.RLock()
	bootstrapped := t.account != ""
	t.mu.RUnlock()
	if bootstrapped {
		if bootstrapKey == "" {
			return "", nil
		}
		h := sha256.Sum256([]byte(bootstrapKey))
		t.mu.RLock()
		_, known := t.keys[h]
		t.mu.RUnlock()
		if known {
			return "", nil
		}
		p := t.newKey(h, "bootstrap", DefaultWorkspace, true)
		if err := t.store.Put(persist.KV{Key: keyRecordKey(h), Value: encodeKey(p)}); err != nil {
			return "", fmt.Errorf("create key: %w", err)
		}
		t.mu.Lock()
		t.index(p)
		t.mu.Unlock()
		return "", nil
	}
	at := t.now().UTC()
	account := id.New(id.Account, at, t.rnd)
	ws := Workspace{ID: DefaultWorkspace, Name: DefaultWorkspace, CreatedAt: at}
	key := bootstrapKey
	if key == "" {
		key = newSecret()
	}
	h := sha256.Sum256([]byte(key))
	p := t.newKey(h, "admin", DefaultWorkspace, true)
	if err := t.store.Put(persist.KV{Key: []byte(accountKey), Value: []byte(account)},
		persist.KV{Key: []byte(wsPrefix + ws.ID), Value: encodeWorkspace(ws)},
		persist.KV{Key: keyRecordKey(h), Value: encodeKey(p)}); err != nil {
		return "", fmt.Errorf("create account: %w", err)
	}
	t.mu.Lock()
	t.account = account
	t.workspaces[ws.ID] = ws
	t.index(p)
	t.mu.Unlock()
	if bootstrapKey != "" {
		return "", nil
	}
	return key, nil
}

// AccountID is the installation's account ("" before Bootstrap).
func (t *Tenancy) AccountID() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.account
}

// Authenticate resolves an Authorization header value ("Bearer <key>").
func (t *Tenancy) Authenticate(header string) (Principal, error) {
	return t.AuthenticateHeader([]byte(header))
}

// bearerKey is the credentials of an Authorization header value of the
// Bearer scheme, named in any case and followed by one or more spaces
// (RFC 7235); false for another scheme.
func bearerKey(header []byte) ([]byte, bool) {
	const scheme = "Bearer "
	if len(header) < len(scheme) || !bytes.EqualFold(header[:len(scheme)], []byte(scheme)) {
		return nil, false
	}
	return bytes.TrimLeft(header[len(scheme):], " "), true
}

// AuthenticateHeader is Authenticate of a header value as a door reads
// it, in a buffer of its own: header is neither kept nor copied (the
// strings Authenticate takes were two copies of every key, and of every
// header, a request).
func (t *Tenancy) AuthenticateHeader(header []byte) (Principal, error) {
	key, ok := bearerKey(header)
	if !ok { // an empty key is no key's: none is stored for it
		return Principal{}, ErrUnauthenticated
	}
	return t.authenticate(sha256.Sum256(key))
}

// AuthenticateKey resolves an API key's secret, as a NATS client presents
// it as its token.
func (t *Tenancy) AuthenticateKey(secret string) (Principal, error) {
	if secret == "" {
		return Principal{}, ErrUnauthenticated
	}
	return t.authenticate(sha256.Sum256([]byte(secret)))
}

// authenticate resolves the SHA-256 h of an API key's secret.
func (t *Tenancy) authenticate(h [sha256.Size]byte) (Principal, error) {
	t.mu.RLock()
	p, found := t.keys[h]
	t.mu.RUnlock()
	if !found && t.catchUp != nil {
		t.caughtUp()
		t.mu.RLock()
		p, found = t.keys[h]
		t.mu.RUnlock()
	}
	// The map is keyed by SHA-256 of the secret, so its lookup time tells an
	// attacker nothing they can steer; the stored hash is then checked in
	// constant time.
	if !found || subtle.ConstantTimeCompare(p.hash[:], h[:]) != 1 || !p.RevokedAt.IsZero() {
		return Principal{}, ErrUnauthenticated
	}
	p.use.touch(t.now())
	return p, nil
}

// Key returns the key with id keyID if it is still in use.
func (t *Tenancy) Key(keyID string) (Principal, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	p, ok := t.keys[t.byID[keyID]]
	if !ok || !p.RevokedAt.IsZero() {
		return Principal{}, false
	}
	return p, true
}

// Profile returns the key principal with a profile id, revoked or not.
func (t *Tenancy) Profile(profileID string) (Principal, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	h, ok := t.byProfile[profileID]
	if !ok {
		return Principal{}, false
	}
	return t.keys[h], true
}

// Workspace returns a workspace by id. In a cluster one not known here is
// looked up again once this node's directory has caught up (see
// CatchUpOnMiss): it may have been made on another node a moment ago.
func (t *Tenancy) Workspace(wsID string) (Workspace, bool) {
	ws, ok := t.workspace(wsID)
	if !ok && t.catchUp != nil {
		t.caughtUp()
		ws, ok = t.workspace(wsID)
	}
	return ws, ok
}

func (t *Tenancy) workspace(wsID string) (Workspace, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ws, ok := t.workspaces[wsID]
	return ws, ok
}

// current brings, in a cluster, this node's directory up to date before a
// list is read, so the list holds every write any node answered before it.
func (t *Tenancy) current() {
	if t.catchUp != nil {
		t.caughtUp()
	}
}

// Workspaces lists the workspaces p may act on, by id.
func (t *Tenancy) Workspaces(p Principal) []Workspace {
	t.current()
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []Workspace
	for _, ws := range t.workspaces {
		if p.CanUse(ws.ID) {
			out = append(out, ws)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// checkName checks a workspace's or a key's name: 1-200 bytes, no
// control characters (a name is printed as it is by the CLI's tables,
// where an escape sequence or a newline could forge a row).
func checkName(name string) error {
	if name == "" || len(name) > 200 {
		return field.Errorf("name", "must be 1-200 bytes")
	}
	if i := strings.IndexFunc(name, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return field.Errorf("name", "must not contain control characters (%U at byte %d)", r, i)
	}
	return nil
}

// CreateWorkspace adds a workspace; only an admin may.
func (t *Tenancy) CreateWorkspace(p Principal, name string) (Workspace, error) {
	if !p.Admin {
		return Workspace{}, ErrForbidden
	}
	if err := checkName(name); err != nil {
		return Workspace{}, err
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	at := t.now().UTC()
	ws := Workspace{ID: id.New(id.Workspace, at, t.rnd), Name: name, CreatedAt: at}
	if err := t.store.Put(persist.KV{Key: []byte(wsPrefix + ws.ID), Value: encodeWorkspace(ws)}); err != nil {
		return Workspace{}, fmt.Errorf("create workspace: %w", err)
	}
	t.mu.Lock()
	t.workspaces[ws.ID] = ws
	t.mu.Unlock()
	return ws, nil
}

// CreateKey makes a key whose home is workspace wsID; p must be able to
// act on it. It returns the key's principal and the secret, shown once.
func (t *Tenancy) CreateKey(p Principal, wsID, name string) (Principal, string, error) {
	if err := t.check(p, wsID); err != nil {
		return Principal{}, "", err
	}
	if err := checkName(name); err != nil {
		return Principal{}, "", err
	}
	secret := newSecret()
	np, err := t.addKey(secret, name, wsID, false)
	if err != nil {
		return Principal{}, "", err
	}
	return np, secret, nil
}

// Keys lists the keys of workspace wsID, revoked ones included, by id; p
// must be able to act on it.
func (t *Tenancy) Keys(p Principal, wsID string) ([]Principal, error) {
	if err := t.check(p, wsID); err != nil {
		return nil, err
	}
	t.current()
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []Principal
	for _, k := range t.keys {
		if k.Home == wsID {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].KeyID < out[j].KeyID })
	return out, nil
}

// RevokeKey revokes key keyID of workspace wsID: it authenticates no more,
// on any door, from the next request or connection on. p must be able to
// act on the workspace, and only an admin may revoke an admin key. Revoking
// a revoked key answers it as it is.
func (t *Tenancy) RevokeKey(p Principal, wsID, keyID string) (Principal, error) {
	k, hooks, err := t.revoke(p, wsID, keyID)
	if err != nil {
		return Principal{}, err
	}
	for _, fn := range hooks {
		fn(k)
	}
	return k, nil
}

func (t *Tenancy) revoke(p Principal, wsID, keyID string) (Principal, []func(Principal), error) {
	if err := t.check(p, wsID); err != nil {
		return Principal{}, nil, err
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.RLock()
	h, ok := t.byID[keyID]
	k := t.keys[h]
	hooks := t.onRevoke
	t.mu.RUnlock()
	if !ok || k.Home != wsID {
		return Principal{}, nil, fmt.Errorf("api key %s: %w", keyID, engine.ErrNotFound)
	}
	if k.Admin && !p.Admin {
		return Principal{}, nil, fmt.Errorf("api key %s is an admin key: %w", keyID, ErrForbidden)
	}
	if !k.RevokedAt.IsZero() {
		return k, hooks, nil
	}
	k.RevokedAt = t.now().UTC()
	if err := t.store.Put(persist.KV{Key: keyRecordKey(h), Value: encodeKey(k)}); err != nil {
		return Principal{}, nil, fmt.Errorf("revoke key: %w", err)
	}
	t.mu.Lock()
	t.keys[h] = k
	t.mu.Unlock()
	return k, hooks, nil
}

// check is nil if p may act on the existing workspace wsID.
func (t *Tenancy) check(p Principal, wsID string) error {
	if _, ok := t.Workspace(wsID); !ok {
		return fmt.Errorf("workspace %s: %w", wsID, engine.ErrNotFound)
	}
	if !p.CanUse(wsID) {
		return ErrForbidden
	}
	return nil
}

func keyRecordKey(h [sha256.Size]byte) []byte { return []byte(fmt.Sprintf("%s%x", keyPrefix, h)) }

func (t *Tenancy) addKey(secret, name, wsID string, admin bool) (Principal, error) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	h := sha256.Sum256([]byte(secret))
	p := t.newKey(h, name, wsID, admin)
	if err := t.store.Put(persist.KV{Key: keyRecordKey(h), Value: encodeKey(p)}); err != nil {
		return Principal{}, fmt.Errorf("create key: %w", err)
	}
	t.mu.Lock()
	t.index(p)
	t.mu.Unlock()
	return p, nil
}

// newKey makes the principal of a new key whose secret hashes to h;
// writeMu is held.
func (t *Tenancy) newKey(h [sha256.Size]byte, name, wsID string, admin bool) Principal {
	at := t.now().UTC()
	return Principal{KeyID: id.New(id.APIKey, at, t.rnd), ProfileID: id.New(id.Profile, at, t.rnd),
		Name: name, Home: wsID, Admin: admin, CreatedAt: at, hash: h, use: new(usage)}
}

// index adds p to the in-memory maps; mu is held.
func (t *Tenancy) index(p Principal) {
	t.keys[p.hash] = p
	t.byID[p.KeyID] = p.hash
	t.byProfile[p.ProfileID] = p.hash
}

func (t *Tenancy) load() error {
	acc, err := t.store.Get([]byte(accountKey))
	switch {
	case errors.Is(err, persist.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("load account: %w", err)
	}
	t.account = string(acc)
	err = t.store.Scan([]byte(wsPrefix), func(_, v []byte) error {
		ws, err := decodeWorkspace(v)
		t.workspaces[ws.ID] = ws
		return err
	})
	if err != nil {
		return fmt.Errorf("load workspaces: %w", err)
	}
	err = t.store.Scan([]byte(keyPrefix), func(k, v []byte) error {
		var h [sha256.Size]byte
		hexHash := k[len(keyPrefix):]
		if len(hexHash) != hex.EncodedLen(sha256.Size) {
			return fmt.Errorf("load key %q: %w", k, errBadKeyHash)
		}
		if _, err := hex.Decode(h[:], hexHash); err != nil {
			return fmt.Errorf("load key %q: %w: %w", k, errBadKeyHash, err)
		}
		p, err := decodeKey(v)
		if err != nil {
			return fmt.Errorf("load key %q: %w", k, err)
		}
		p.hash = h
		p.use = new(usage)
		t.index(p)
		return nil
	})
	if err != nil {
		return err
	}
	return t.loadUsage()
}

func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "pl_" + base64.RawURLEncoding.EncodeToString(b[:])
}

func encodeWorkspace(ws Workspace) []byte {
	b := []byte{'{'}
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, ws.ID)
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, ws.Name)
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, ws.CreatedAt)
	return append(b, '}')
}

func decodeWorkspace(v []byte) (Workspace, error) {
	o, err := fastjson.ParseBytes(v)
	if err != nil {
		return Workspace{}, fmt.Errorf("workspace record: %w", err)
	}
	at, _ := time.Parse(time.RFC3339Nano, string(o.GetStringBytes("created_at")))
	return Workspace{ID: string(o.GetStringBytes("id")), Name: string(o.GetStringBytes("name")), CreatedAt: at}, nil
}

func encodeKey(p Principal) []byte {
	b := []byte{'{'}
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, p.KeyID)
	b = jsonw.Key(b, "profile_id")
	b = jsonw.String(b, p.ProfileID)
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, p.Name)
	b = jsonw.Key(b, "workspace")
	b = jsonw.String(b, p.Home)
	b = jsonw.Key(b, "admin")
	b = jsonw.Bool(b, p.Admin)
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, p.CreatedAt)
	if !p.RevokedAt.IsZero() {
		b = jsonw.Key(b, "revoked_at")
		b = jsonw.Time(b, p.RevokedAt)
	}
	return append(b, '}')
}

func decodeKey(v []byte) (Principal, error) {
	o, err := fastjson.ParseBytes(v)
	if err != nil {
		return Principal{}, err
	}
	at, _ := time.Parse(time.RFC3339Nano, string(o.GetStringBytes("created_at")))
	p := Principal{KeyID: string(o.GetStringBytes("id")), ProfileID: string(o.GetStringBytes("profile_id")),
		Name: string(o.GetStringBytes("name")), Home: string(o.GetStringBytes("workspace")),
		Admin: o.GetBool("admin"), CreatedAt: at}
	if s := o.GetStringBytes("revoked_at"); s != nil {
		if p.RevokedAt, err = time.Parse(time.RFC3339Nano, string(s)); err != nil {
			return Principal{}, fmt.Errorf("revoked_at: %w", err)
		}
	}
	return p, nil
}
