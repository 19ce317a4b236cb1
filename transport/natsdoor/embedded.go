package natsdoor

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
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
	// ever lands in it: a workspace with this id is refused, and connection
	// accounts are named <ws>-c<n>.
	ServiceAccount = "PLAUDIT"
	// ServiceUser is the user name of Plaudit's own connection.
	ServiceUser = "plaudit"
	// ServiceName is the micro service name whose discovery subjects
	// workspaces may reach.
	ServiceName = "plaudit"
)

// DefaultReuseDelay is how long after a connection account was handed out
// it is not handed out again, even if it looks idle.
const DefaultReuseDelay = 5 * time.Second

// KeyAuth resolves a client's NATS token (a Plaudit API key) to the key;
// ok=false for an unknown or revoked key. It is called once per connection
// attempt, on the server's connection goroutine; a key revoked later keeps
// its open connections.
type KeyAuth func(token string) (k Key, ok bool)

// Key is an API key as the embedded server needs it.
type Key struct {
	ID        string
	Workspace string // its home
	// Admin keys may also ask $SRV.STATS, which counts every workspace's
	// requests: an admin key may act on every workspace anyway.
	Admin bool
}

// Embedded authenticates the clients of an embedded nats-server and sets up
// the accounts they land in; it implements server.Authentication, to be set
// as server.Options.CustomClientAuthentication (Options does so).
//
// Every tenant connection gets an account of its own, a connection account
// (see the package documentation); connection accounts are pooled per API
// key and reused once idle, so reconnects do not grow them.
type Embedded struct {
	// IdentityKey is set, the same, on every server of a cluster (see
	// IdentityKey): connection accounts' names then carry their MAC, and a
	// service takes another server's clients' requests (which reach it
	// through the queue group) as their keys'. Set before Start.
	IdentityKey []byte

	auth KeyAuth
	kp   nkeys.KeyPair // Plaudit's own user; the seed never leaves memory
	pub  string
	// tag makes this server's connection account names its own: servers
	// joined in a cluster (Cluster) share accounts by name, and two
	// servers' "<ws>-c1", one for each of two keys, would be one account,
	// each key's connection receiving the other's judge requests.
	tag string
	// reuseDelay: a connection account handed out less than this long ago
	// is not handed out again (DefaultReuseDelay); now is the clock (tests
	// replace it).
	reuseDelay time.Duration
	now        func() time.Time
	// Logger, when set before Start, receives the server's log from its
	// first line (see ServerLogger).
	Logger server.Logger

	mu       sync.RWMutex
	srv      *server.Server
	svc      *server.Account
	seq      uint64                  // last connection account number
	accounts map[string]*connAccount // every connection account, by name
	pools    map[poolKey][]*connAccount
	judges   map[string]*judgeRing // connection accounts by workspace
}

// connAccount is a connection account: set up for workspace ws, handed out
// only to connections of key keyID.
type connAccount struct {
	acc    *server.Account
	ws     string
	keyID  string
	admin  bool      // the key's: its account imports $SRV.STATS
	judge  string    // plaudit.judgeconn.<n>.: its judge import's prefix in the service account
	handed time.Time // when it was last handed out
}

// poolKey names the pool of one API key (in its workspace).
type poolKey struct{ ws, keyID string }

// judgeRing is a workspace's connection accounts, taken in turn by
// JudgeRequest from next.
type judgeRing struct {
	accs []*connAccount
	next int
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
	return &Embedded{auth: auth, kp: kp, pub: pub, tag: strings.ToLower(rand.Text()[:8]), reuseDelay: DefaultReuseDelay, now: time.Now,
		accounts: map[string]*connAccount{}, pools: map[poolKey][]*connAccount{}, judges: map[string]*judgeRing{}}, nil
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

// Start creates the server from opts, registers and sets up the service
// account, starts the server and waits until it accepts connections (up to
// 10 s). opts must have e as CustomClientAuthentication and
// AlwaysEnableNonce set, as Options makes them; other authentication
// options (users, nkeys, accounts, operators) are ignored by the server and
// must be left empty. An Embedded serves a single server: Start may be
// called once.
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
	if err == nil {
		err = setUpService(svc)
	}
	if err != nil {
		e.mu.Unlock()
		return nil, fmt.Errorf("natsdoor: service account: %w", err)
	}
	e.srv, e.svc = s, svc
	e.mu.Unlock()

	fatal := &fatalLogger{next: e.Logger}
	s.SetLoggerV2(fatal, false, false, false)
	// Start opens the client listener before it returns: one that could
	// not be opened (the port taken) is reported now, with the listener's
	// own error, not after ReadyForConnections' wait.
	s.Start()
	if s.Addr() == nil {
		s.Shutdown()
		return nil, fmt.Errorf("natsdoor: embedded nats on %s: %w", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)),
			fatal.err())
	}
	// The other listeners (routes, in a cluster) open on the server's own
	// goroutines: one that fails is reported at once, not after the wait.
	for deadline := time.Now().Add(10 * time.Second); !s.ReadyForConnections(50 * time.Millisecond); {
		if err := fatal.first(); err != nil {
			s.Shutdown()
			return nil, fmt.Errorf("natsdoor: embedded nats: %w", err)
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			return nil, errors.New("natsdoor: embedded nats not ready after 10s")
		}
	}
	// JetStream (Cluster.Apply) is for Plaudit's own use: the service
	// account's, never a tenant's.
	if opts.JetStream {
		if err := svc.EnableJetStream(nil, nil); err != nil {
			s.Shutdown()
			return nil, fmt.Errorf("natsdoor: JetStream for the service account: %w", err)
		}
	}
	return s, nil
}

// fatalLogger passes the server's log on to next, if any, and keeps its
// first fatal error: nats-server reports a listener it could not open only
// there, as Fatalf("Error listening on port: %s, %q", hostport, err).
type fatalLogger struct {
	next  server.Logger
	mu    sync.Mutex
	fatal error
}

func (l *fatalLogger) err() error {
	if err := l.first(); err != nil {
		return err
	}
	return errors.New("not listening")
}

// first is the first fatal error logged, or nil.
func (l *fatalLogger) first() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}

// Fatalf keeps the first error among its arguments (the listener's own,
// which errors.Is can match to syscall.EADDRINUSE), else the line.
func (l *fatalLogger) Fatalf(format string, v ...any) {
	l.mu.Lock()
	if l.fatal == nil {
		for _, a := range v {
			if err, ok := a.(error); ok {
				l.fatal = err
				break
			}
		}
		if l.fatal == nil {
			l.fatal = fmt.Errorf(format, v...)
		}
	}
	l.mu.Unlock()
	if l.next != nil {
		l.next.Fatalf(format, v...)
	}
}

func (l *fatalLogger) Noticef(format string, v ...any) {
	if l.next != nil {
		l.next.Noticef(format, v...)
	}
}

func (l *fatalLogger) Warnf(format string, v ...any) {
	if l.next != nil {
		l.next.Warnf(format, v...)
	}
}

func (l *fatalLogger) Errorf(format string, v ...any) {
	if l.next != nil {
		l.next.Errorf(format, v...)
	}
}

func (l *fatalLogger) Debugf(format string, v ...any) {
	if l.next != nil {
		l.next.Debugf(format, v...)
	}
}

func (l *fatalLogger) Tracef(format string, v ...any) {
	if l.next != nil {
		l.next.Tracef(format, v...)
	}
}

// setUpService makes the service account's exports, once: the service
// subjects of every workspace and the discovery subjects. They are public,
// but only this code adds imports, each connection account's narrowed to
// its own workspace.
func setUpService(svc *server.Account) error {
	if err := svc.AddServiceExportWithResponse("plaudit.v1.>", server.Singleton, nil); err != nil {
		return err
	}
	for _, subj := range discoveryOf(true) {
		if err := svc.AddServiceExportWithResponse(subj, server.Streamed, nil); err != nil {
			return err
		}
		// A streamed response route lives until this threshold; adding the
		// export reset it to the server's default of 2 minutes. Imports
		// added later take the export as it is then.
		if err := svc.SetServiceExportResponseThreshold(subj, discoveryResponseTime); err != nil {
			return err
		}
	}
	return nil
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
// id, which goes to a connection account of its own (one of its key's idle
// ones, or a new one) as a user named by the key id, with the permissions
// of a workspace user. Everything else is refused.
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
		e.mu.RLock()
		svc := e.svc
		e.mu.RUnlock()
		if svc == nil {
			return false
		}
		c.RegisterUser(&server.User{Username: ServiceUser, Account: svc})
		return true
	case o.Token != "" && o.Nkey == "" && o.Sig == "":
		k, ok := e.auth(o.Token)
		keyID, ws := k.ID, k.Workspace
		if !ok || !validKeyID(keyID) || !validWorkspace(ws) {
			return false
		}
		// The lock spans the choice and the registration: RegisterUser adds
		// the client to the account before it returns (nats-server 2.15),
		// so the next Check sees the account taken.
		e.mu.Lock()
		defer e.mu.Unlock()
		ca, err := e.connAccountLocked(ws, keyID, k.Admin)
		if err != nil {
			return false
		}
		c.RegisterUser(&server.User{Username: keyID, Account: ca.acc, Permissions: workspacePermissions(ws, k.Admin)})
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

// validWorkspace reports whether ws can name a workspace: 1 to 128 of
// [A-Za-z0-9_-] (so it is one subject token and its connection accounts
// are never $G or $SYS), and not the service account.
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
// $SRV.STATS (statsDiscovery) reports every tenant's traffic: only admin
// keys reach it. The per-instance $SRV.*.plaudit.<id> are left out.
var (
	discovery      = []string{"$SRV.PING", "$SRV.PING." + ServiceName, "$SRV.INFO", "$SRV.INFO." + ServiceName}
	statsDiscovery = []string{"$SRV.STATS", "$SRV.STATS." + ServiceName}
)

// discoveryOf is the discovery subjects a key may reach.
func discoveryOf(admin bool) []string {
	if admin {
		return slices.Concat(discovery, statsDiscovery)
	}
	return discovery
}

// discoveryResponseTime bounds how long the server keeps the route back to a
// discovery requester, so a client pinging in a loop cannot pile them up.
const discoveryResponseTime = 5 * time.Second

func serviceSubject(ws string) string { return "plaudit.v1." + ws + ".>" }

func judgeSubject(ws string) string { return "plaudit.judge." + ws + ".>" }

// connAccountLocked returns an account for a new connection of key keyID of
// workspace ws: one of the key's accounts with no connection, not handed
// out in the last reuseDelay, or else a new one. e.mu is held.
//
// In nats-server 2.15, RegisterUser adds the client to the account before
// Check returns, and Check holds e.mu across both, so an account handed out
// already counts its connection when the next Check looks. The delay is a
// margin should a server register later, and it spaces the reuse of an
// account that a connection just left.
func (e *Embedded) connAccountLocked(ws, keyID string, admin bool) (*connAccount, error) {
	if e.srv == nil {
		return nil, errors.New("natsdoor: not started")
	}
	now := e.now()
	pk := poolKey{ws, keyID}
	for _, ca := range e.pools[pk] {
		if now.Sub(ca.handed) >= e.reuseDelay && ca.acc.NumLocalConnections() == 0 {
			ca.handed = now
			return ca, nil
		}
	}
	e.seq++
	n := e.tag + strconv.FormatUint(e.seq, 10)
	// The name is never a workspace id's account: no account is named by
	// a workspace id, and <ws>-c<n>-<key id> is unique (n is). It names
	// its workspace and key for every server of a cluster, whose services
	// may answer the requests of this server's clients (see Requester).
	// RegisterAccount fails if the name exists: an account this code did
	// not set up (or whose set up failed) is never handed out.
	acc, err := e.srv.RegisterAccount(e.connAccountName(ws, n, keyID))
	if err != nil {
		return nil, err
	}
	ca := &connAccount{acc: acc, ws: ws, keyID: keyID, admin: admin, judge: "plaudit.judgeconn." + n + ".", handed: now}
	if err := e.setUp(ca); err != nil {
		return nil, err
	}
	e.accounts[acc.Name] = ca
	e.pools[pk] = append(e.pools[pk], ca)
	r := e.judges[ws]
	if r == nil {
		r = &judgeRing{}
		e.judges[ws] = r
	}
	r.accs = append(r.accs, ca)
	return ca, nil
}

// setUp wires a new connection account to the service account.
func (e *Embedded) setUp(ca *connAccount) error {
	svc, acc, ws := e.svc, ca.acc, ca.ws
	// Requests: connection -> service, narrowed to the workspace's subjects.
	// The server names the requesting account in Nats-Request-Info, which
	// is enough: the account is this connection's, so it names the key.
	// (Sharing the client's details would add its server, host, name and
	// more to every request's header, for a user name the account already
	// tells.)
	if err := acc.AddServiceImport(svc, serviceSubject(ws), serviceSubject(ws)); err != nil {
		return err
	}
	for _, subj := range discoveryOf(ca.admin) {
		if err := acc.AddServiceImport(svc, subj, subj); err != nil {
			return err
		}
	}
	// Judges: service -> this connection only, under a subject of its own
	// in the service account (the server maps the > of one to the other).
	if err := acc.AddServiceExportWithResponse(judgeSubject(ws), server.Singleton, []*server.Account{svc}); err != nil {
		return err
	}
	return svc.AddServiceImport(acc, ca.judge+">", judgeSubject(ws))
}

// workspacePermissions are those of a user of workspace ws: publish its
// service subjects and the discovery subjects (an admin key's include
// $SRV.STATS), answer what it received, and subscribe to its inboxes and
// its judge subjects.
func workspacePermissions(ws string, admin bool) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append([]string{serviceSubject(ws)}, discoveryOf(admin)...)},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>", judgeSubject(ws)}},
		Response: &server.ResponsePermission{
			MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS,
			Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION,
		},
	}
}

// infoParsers parse Nats-Request-Info headers.
var infoParsers fastjson.ParserPool

// requestInfo returns the workspace of a service subject
// plaudit.v1.<ws>.>, and the account and user of the last
// Nats-Request-Info value in h (the server appends its own after the
// client's headers); ok=false if any is missing. acc and user live in p's
// memory: the caller returns p to infoParsers once done with them.
func requestInfo(subject string, h map[string][]string) (ws string, acc, user []byte, p *fastjson.Parser, ok bool) {
	rest, found := strings.CutPrefix(subject, "plaudit.v1.")
	if !found {
		return "", nil, nil, nil, false
	}
	ws, _, _ = strings.Cut(rest, ".")
	vals := h[server.ClientInfoHdr]
	if len(vals) == 0 || !validWorkspace(ws) {
		return "", nil, nil, nil, false
	}
	// Only two members of server.ClientInfo are read: fastjson finds them
	// without decoding the rest (encoding/json took a tenth of a request's
	// CPU here).
	p = infoParsers.Get()
	v, err := p.Parse(vals[len(vals)-1])
	if err != nil {
		infoParsers.Put(p)
		return "", nil, nil, nil, false
	}
	acc, user = v.GetStringBytes("acc"), v.GetStringBytes("user")
	if len(acc) == 0 {
		infoParsers.Put(p)
		return "", nil, nil, nil, false
	}
	return ws, acc, user, p, true
}

// Requester tells who sent a request that reached the service on subject
// plaudit.v1.<ws>.>: the workspace and key id of the connection account
// named by the Nats-Request-Info header (server.ClientInfoHdr) that the
// server sets when the request crosses the account's import, after
// removing the client's own. ok=false unless the subject is a service
// subject, the header's account is a connection account of the subject's
// workspace (set up by this server, or in a cluster by another, whose
// signed name tells its workspace and key: see IdentityKey), and any user
// the header names is the key that account was handed to (the server names
// none: the account tells the key). The last value is taken: the server
// appends its own after the client's headers.
//
// The workspace is certain: the server lets a connection publish only on
// its own workspace's service subjects. The connection account and key are
// certain for clients that write well-formed headers (nats.go, the nats
// CLI), but not for a client writing raw protocol: the server finds the
// header it replaces only at a CRLF line start, while nats.go also splits
// header lines at a bare LF and ends the header block at the first empty
// line, so a hand-written block such as
// "NATS/1.0\r\nX: 1\nNats-Request-Info: {...}\n\n...\r\n\r\n" shows the
// service a Nats-Request-Info of the client's choosing. Such a client can
// claim another connection account of its own workspace (and that
// account's key) whose name it knows, never one of another workspace
// (checked here), nor a name no server made (signed in a cluster). Where the
// key matters for authorization, authenticate the request itself (e.g. its
// Authorization header) and use this key id for attribution.
func (e *Embedded) Requester(subject string, h map[string][]string) (workspace, keyID string, ok bool) {
	ws, acc, user, p, ok := requestInfo(subject, h)
	if !ok {
		return "", "", false
	}
	defer infoParsers.Put(p)
	e.mu.RLock()
	ca := e.accounts[string(acc)]
	e.mu.RUnlock()
	accWS, keyID := "", ""
	if ca != nil {
		accWS, keyID = ca.ws, ca.keyID
	} else if accWS, keyID, ok = e.parseConnAccount(string(acc)); !ok {
		// Not a connection account of this server, nor one another server
		// of the cluster signed (its clients' requests reach the services
		// of every server through their queue group).
		return "", "", false
	}
	if accWS != ws || (len(user) > 0 && string(user) != keyID) {
		return "", "", false
	}
	return accWS, keyID, true
}

// connAccountName is the name of connection account n of key keyID of
// workspace ws: <ws>-c<n>-<key id>, and on the servers of a cluster a MAC
// of the three under IdentityKey after one more '-'.
func (e *Embedded) connAccountName(ws, n, keyID string) string {
	name := ws + "-c" + n + "-" + keyID
	if e.IdentityKey != nil {
		name += "-" + e.accountMAC(ws, n, keyID)
	}
	return name
}

func (e *Embedded) accountMAC(ws, n, keyID string) string {
	m := hmac.New(sha256.New, e.IdentityKey)
	m.Write([]byte(ws + "\x00" + n + "\x00" + keyID))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// parseConnAccount reads back the workspace and key of a connection
// account another server of the cluster named: ok only with IdentityKey
// set and the name's MAC under it, so that a name the servers did not
// make is never taken for a key's. (Key ids hold no '-', n no "-c".)
func (e *Embedded) parseConnAccount(name string) (ws, keyID string, ok bool) {
	if e.IdentityKey == nil {
		return "", "", false
	}
	parts := strings.Split(name, "-")
	if len(parts) < 4 {
		return "", "", false
	}
	mac, keyID := parts[len(parts)-1], parts[len(parts)-2]
	rest := strings.Join(parts[:len(parts)-2], "-")
	j := strings.LastIndex(rest, "-c")
	if j < 0 || j+2 == len(rest) {
		return "", "", false
	}
	ws, n := rest[:j], rest[j+2:]
	if !validWorkspace(ws) || !validKeyID(keyID) || !hmac.Equal([]byte(mac), []byte(e.accountMAC(ws, n, keyID))) {
		return "", "", false
	}
	return ws, keyID, true
}

// IdentityKey derives, from a cluster's route secret, the key every
// server of the cluster signs its connection accounts' names with.
func IdentityKey(clusterSecret string) []byte {
	m := hmac.New(sha256.New, []byte(clusterSecret))
	m.Write([]byte("plaudit natsdoor connection accounts"))
	return m.Sum(nil)
}

// validKeyID reports whether keyID can end a connection account's name:
// 1 to 128 of [A-Za-z0-9_] (an API key's id is key_ and a ULID).
func validKeyID(keyID string) bool {
	if keyID == "" || len(keyID) > 128 {
		return false
	}
	for _, r := range keyID {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// JudgeRequest sends data over nc, Plaudit's own connection (of the service
// account), as a request for plaudit.judge.<ws>.<name> to one connection of
// workspace ws subscribed to it, and waits up to timeout for its reply. The
// connections of ws that serve the subject are taken in turn; the request
// goes through the chosen connection account's own import,
// plaudit.judgeconn.<n>.<name>, so no other connection sees it. It returns
// nats.ErrNoResponders at once if no connection of ws serves the subject.
func (e *Embedded) JudgeRequest(nc *nats.Conn, ws, name string, data []byte, timeout time.Duration) (*nats.Msg, error) {
	if !validWorkspace(ws) || !validJudgeName(name) {
		return nil, fmt.Errorf("natsdoor: bad judge subject plaudit.judge.%s.%s", ws, name)
	}
	subject := "plaudit.judge." + ws + "." + name
	e.mu.Lock()
	var via string
	if r := e.judges[ws]; r != nil {
		for i := range r.accs {
			j := (r.next + i) % len(r.accs)
			if ca := r.accs[j]; ca.acc.SubscriptionInterest(subject) {
				via, r.next = ca.judge+name, j+1
				break
			}
		}
	}
	e.mu.Unlock()
	if via == "" {
		return nil, nats.ErrNoResponders
	}
	return nc.Request(via, data, timeout)
}

// validJudgeName reports whether name can end a judge subject: one or more
// non-empty tokens, without wildcards or white space.
func validJudgeName(name string) bool {
	if name == "" {
		return false
	}
	for tok := range strings.SplitSeq(name, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}

// Disconnect closes every open connection of key keyID: a revoked key
// loses its connections, not only its next ones.
func (e *Embedded) Disconnect(keyID string) {
	e.mu.RLock()
	s := e.srv
	e.mu.RUnlock()
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
