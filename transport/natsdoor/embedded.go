package natsdoor

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/valyala/fastjson"
)

const (
	// ServiceAccount is the account of Plaudit's own connection. No token
	// ever lands in it: a workspace with this id is refused.
	ServiceAccount = "PLAUDIT"
	// ServiceUser is the user name of Plaudit's own connection.
	ServiceUser = "plaudit"
	// ServiceName is the micro service name whose discovery subjects
	// workspaces may reach.
	ServiceName = "plaudit"
)

// KeyAuth resolves a client's NATS token (a Plaudit API key) to the key's id
// and home workspace; ok=false for an unknown or revoked key. It is called
// once per connection attempt, on the server's connection goroutine; a key
// revoked later keeps its open connections.
type KeyAuth func(token string) (keyID, workspace string, ok bool)

// Embedded authenticates the clients of an embedded nats-server and sets up
// the accounts they land in; it implements server.Authentication, to be set
// as server.Options.CustomClientAuthentication (Options does so).
type Embedded struct {
	auth KeyAuth
	kp   nkeys.KeyPair // Plaudit's own user; the seed never leaves memory
	pub  string

	mu         sync.Mutex
	srv        *server.Server
	svc        *server.Account
	workspaces map[string]*server.Account // accounts set up, by workspace id
}

// NewEmbedded returns an Embedded resolving tokens with auth, with a freshly
// generated nkey user for Plaudit's own connection.
func NewEmbedded(auth KeyAuth) (*Embedded, error) {
	if auth == nil {
		return nil, errors.New("natsdoor: nil KeyAuth")
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("natsdoor: service nkey: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("natsdoor: service nkey: %w", err)
	}
	return &Embedded{auth: auth, kp: kp, pub: pub, workspaces: map[string]*server.Account{}}, nil
}

// Options returns server options listening on host:port (port as in
// server.Options: server.RANDOM_PORT for a random one, 0 for the default
// 4222) with e as the client authentication, a nonce sent to every client,
// and no signal handlers or logging.
func (e *Embedded) Options(host string, port int) *server.Options {
	return &server.Options{
		Host:                       host,
		Port:                       port,
		CustomClientAuthentication: e,
		AlwaysEnableNonce:          true,
		NoSigs:                     true,
		NoLog:                      true,
	}
}

// Start creates the server from opts, registers the service account, starts
// the server and waits until it accepts connections (up to 10 s). opts must
// have e as CustomClientAuthentication and AlwaysEnableNonce set, as Options
// makes them; other authentication options (users, nkeys, accounts,
// operators) are ignored by the server and must be left empty. An Embedded
// serves a single server: Start may be called once.
func (e *Embedded) Start(opts *server.Options) (*server.Server, error) {
	if opts.CustomClientAuthentication != e || !opts.AlwaysEnableNonce {
		return nil, errors.New("natsdoor: options need CustomClientAuthentication = e and AlwaysEnableNonce")
	}
	e.mu.Lock()
	if e.srv != nil {
		e.mu.Unlock()
		return nil, errors.New("natsdoor: Start called twice")
	}
	s, err := server.NewServer(opts)
	if err != nil {
		e.mu.Unlock()
		return nil, fmt.Errorf("natsdoor: embedded nats: %w", err)
	}
	svc, err := s.RegisterAccount(ServiceAccount)
	if err != nil {
		e.mu.Unlock()
		return nil, fmt.Errorf("natsdoor: service account: %w", err)
	}
	e.srv, e.svc = s, svc
	e.mu.Unlock()

	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("natsdoor: embedded nats not ready after 10s")
	}
	return s, nil
}

// ConnectOptions are the nats.go options with which Plaudit's own connection
// authenticates: its nkey, signing the server's nonce.
func (e *Embedded) ConnectOptions() []nats.Option {
	return []nats.Option{nats.Nkey(e.pub, e.kp.Sign)}
}

// Check authenticates a connecting client and registers it with its account
// and permissions. It accepts exactly two kinds of CLIENT connection:
// Plaudit's own, presenting only its nkey and a valid signature of the
// nonce, which goes to the service account with every permission; and one
// presenting only a token that KeyAuth accepts for a well-formed workspace
// id, which goes to that workspace's account as a user named by the key id,
// with the permissions of a workspace user. Everything else is refused.
func (e *Embedded) Check(c server.ClientAuthentication) bool {
	if c.Kind() != server.CLIENT {
		return false
	}
	o := c.GetOpts()
	if o.JWT != "" || o.Username != "" || o.Password != "" {
		return false
	}
	switch {
	case o.Nkey != "" && o.Token == "":
		if o.Nkey != e.pub || !e.signedNonce(o.Sig, c.GetNonce()) {
			return false
		}
		e.mu.Lock()
		svc := e.svc
		e.mu.Unlock()
		if svc == nil {
			return false
		}
		c.RegisterUser(&server.User{Username: ServiceUser, Account: svc})
		return true
	case o.Token != "" && o.Nkey == "" && o.Sig == "":
		keyID, ws, ok := e.auth(o.Token)
		if !ok || keyID == "" || !validWorkspace(ws) {
			return false
		}
		acc, err := e.workspace(ws)
		if err != nil {
			return false
		}
		c.RegisterUser(&server.User{Username: keyID, Account: acc, Permissions: workspacePermissions(ws)})
		return true
	default:
		return false
	}
}

// signedNonce reports whether sig (base64, URL or standard encoding, as
// nats.go and the server accept) is Plaudit's signature of nonce.
func (e *Embedded) signedNonce(sig string, nonce []byte) bool {
	if sig == "" || len(nonce) == 0 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return false
		}
	}
	return e.kp.Verify(nonce, raw) == nil
}

// validWorkspace reports whether ws can name a workspace account: 1 to 128
// of [A-Za-z0-9_-] (so it is one subject token and never $G or $SYS), and
// not the service account.
func validWorkspace(ws string) bool {
	if ws == "" || len(ws) > 128 || ws == ServiceAccount {
		return false
	}
	for _, r := range ws {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// discovery are the micro discovery subjects a workspace may reach, exported
// streamed because several services or instances may answer one request.
// $SRV.STATS is left out (it reports every tenant's traffic), and so are the
// per-instance $SRV.*.plaudit.<id>.
var discovery = []string{"$SRV.PING", "$SRV.PING." + ServiceName, "$SRV.INFO", "$SRV.INFO." + ServiceName}

// discoveryResponseTime bounds how long the server keeps the route back to a
// discovery requester, so a client pinging in a loop cannot pile them up.
const discoveryResponseTime = 5 * time.Second

func serviceSubject(ws string) string { return "plaudit.v1." + ws + ".>" }

func judgeSubject(ws string) string { return "plaudit.judge." + ws + ".>" }

// workspace returns the account of ws, registering and setting it up on
// first use; later calls return the same account.
func (e *Embedded) workspace(ws string) (*server.Account, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if acc, ok := e.workspaces[ws]; ok {
		return acc, nil
	}
	if e.srv == nil {
		return nil, errors.New("natsdoor: not started")
	}
	// RegisterAccount fails if the name exists: an account this code did not
	// set up (or whose set up failed) is never handed out.
	acc, err := e.srv.RegisterAccount(ws)
	if err != nil {
		return nil, err
	}
	if err := e.setUp(acc, ws); err != nil {
		return nil, err
	}
	e.workspaces[ws] = acc
	return acc, nil
}

// setUp wires a new workspace account to the service account. Exports name
// the one account allowed to import them.
func (e *Embedded) setUp(acc *server.Account, ws string) error {
	svc, only := e.svc, []*server.Account{acc}
	// Requests: ws -> service, same subject on both sides, with the
	// requester (account, user) shared in Nats-Request-Info.
	if err := svc.AddServiceExportWithResponse(serviceSubject(ws), server.Singleton, only); err != nil {
		return err
	}
	if err := acc.AddServiceImport(svc, serviceSubject(ws), serviceSubject(ws)); err != nil {
		return err
	}
	if err := acc.SetServiceImportSharing(svc, serviceSubject(ws), true); err != nil {
		return err
	}
	for _, subj := range discovery {
		if err := svc.AddServiceExportWithResponse(subj, server.Streamed, only); err != nil {
			return err
		}
		// A streamed response route lives until this threshold; adding the
		// export reset it to the server's default of 2 minutes.
		if err := svc.SetServiceExportResponseThreshold(subj, discoveryResponseTime); err != nil {
			return err
		}
		if err := acc.AddServiceImport(svc, subj, subj); err != nil {
			return err
		}
	}
	// Judges: service -> ws.
	if err := acc.AddServiceExportWithResponse(judgeSubject(ws), server.Singleton, []*server.Account{svc}); err != nil {
		return err
	}
	return svc.AddServiceImport(acc, judgeSubject(ws), judgeSubject(ws))
}

// workspacePermissions are those of a user of workspace ws: publish its
// service subjects and the discovery subjects, answer what it received, and
// subscribe to its inboxes and its judge subjects.
func workspacePermissions(ws string) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append([]string{serviceSubject(ws)}, discovery...)},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", judgeSubject(ws)}},
		Response: &server.ResponsePermission{
			MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS,
			Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION,
		},
	}
}

// infoParsers parse Nats-Request-Info headers.
var infoParsers fastjson.ParserPool

// RequestInfo tells who sent a request that reached the service on subject
// plaudit.v1.<ws>.>: the workspace (account) and key id (user) from the
// Nats-Request-Info header (server.ClientInfoHdr) that the server sets when
// the request crosses the workspace's import, after removing the client's
// own. ok=false unless the subject is a service subject and the header names
// a user of the subject's workspace. The last value is taken: the server
// appends its own after the client's headers.
//
// The workspace is certain: the server lets a workspace publish only on its
// own service subjects. The key id is certain for clients that write
// well-formed headers (nats.go, the nats CLI), but not for a client writing
// raw protocol: the server finds the header it replaces only at a CRLF line
// start, while nats.go also splits header lines at a bare LF and ends the
// header block at the first empty line, so a hand-written block such as
// "NATS/1.0\r\nX: 1\nNats-Request-Info: {...}\n\n...\r\n\r\n" shows the service a
// Nats-Request-Info of the client's choosing. Such a client can claim
// another key of its own workspace, never another workspace (checked
// here). Where the key matters for authorization, authenticate the request
// itself (e.g. its Authorization header) and use this key id for
// attribution.
func RequestInfo(subject string, h map[string][]string) (workspace, keyID string, ok bool) {
	rest, found := strings.CutPrefix(subject, "plaudit.v1.")
	if !found {
		return "", "", false
	}
	ws, _, _ := strings.Cut(rest, ".")
	vals := h[server.ClientInfoHdr]
	if len(vals) == 0 {
		return "", "", false
	}
	// Only two members of server.ClientInfo are read: fastjson finds them
	// without decoding the rest (encoding/json took a tenth of a request's
	// CPU here).
	p := infoParsers.Get()
	defer infoParsers.Put(p)
	v, err := p.Parse(vals[len(vals)-1])
	if err != nil {
		return "", "", false
	}
	acc, user := string(v.GetStringBytes("acc")), string(v.GetStringBytes("user"))
	if acc != ws || !validWorkspace(ws) || user == "" {
		return "", "", false
	}
	return ws, user, true
}

// Disconnect closes every open connection of key keyID: a revoked key
// loses its connections, not only its next ones.
func (e *Embedded) Disconnect(keyID string) {
	e.mu.Lock()
	s := e.srv
	e.mu.Unlock()
	if s == nil {
		return
	}
	for offset := 0; ; {
		cz, err := s.Connz(&server.ConnzOptions{User: keyID, Offset: offset, Limit: 1024})
		if err != nil || len(cz.Conns) == 0 {
			return
		}
		for _, c := range cz.Conns {
			_ = s.DisconnectClientByID(c.Cid)
		}
		offset += len(cz.Conns)
	}
}
