// Package natsdoor is Plaudit's NATS door. Door (door.go) is a nats.go
// micro service named "plaudit" that translates each request on
// plaudit.v1.<ws>.<agent>.<op> into an api.Request (the subject names the
// workspace, agent and operation; the body carries the rest) and publishes
// the api.Response back, with the micro error headers. Embedded
// (embedded.go) makes the embedded nats-server multi-tenant.
//
// Embedded turns an embedded nats-server into a multi-tenant one without
// configuration files or JWTs. Every account lives in memory and is set up
// from Start and Check, the server's custom client authentication:
//
//   - the service account (ServiceAccount) holds Plaudit's own connection,
//     which authenticates with an nkey generated at start and has every
//     permission. It exports, once, the service subjects plaudit.v1.> and
//     the micro discovery subjects $SRV.PING[.plaudit],
//     $SRV.INFO[.plaudit] and $SRV.STATS[.plaudit] (only this code imports
//     them, each service import narrowed to one workspace, STATS only into
//     an admin key's accounts), and imports each connection account's
//     judge subjects under a subject of that account's own,
//     plaudit.judgeconn.<n>.>, where n is a tag random to the server and a
//     counter (servers of a cluster share accounts by name, so no two may
//     use the same n);
//   - every client connection has an account of its own, a connection
//     account named <ws>-c<n> (never a workspace id, never the service
//     account). It imports from the service account plaudit.v1.<ws>.> of
//     its workspace only (the server names the requesting account in each
//     request's Nats-Request-Info) and the discovery subjects (STATS, which
//     counts every workspace's requests, for an admin key only), and exports
//     to the service account alone its judge subjects plaudit.judge.<ws>.>;
//   - a client authenticates with an API key as its NATS token
//     (nats.Token(key), nats --token key) and lands in a connection account
//     as a user named by the key id. It may publish only on its workspace's
//     service subjects and the discovery subjects, answer requests it received
//     (a judge worker's reply), and subscribe only to _INBOX.> and its
//     workspace's judge subjects.
//
// Why an account per connection: replies are private. Accounts share no
// subject space, so a connection subscribed to _INBOX.> (or to its
// workspace's judge subjects) receives the replies to its own requests and
// the judge requests sent to it, and nothing of any other connection, of
// its own key, of another key of its workspace, or of another workspace.
// Connection accounts are pooled per API key: a new connection of a key
// takes one of the key's accounts that has no connection and was not handed
// out in the last few seconds, or a new one; so reconnects do not grow
// them, and a key has about as many accounts as it ever had connections at
// once.
//
// Judges: Plaudit sends a judge request with Embedded.JudgeRequest, for
// plaudit.judge.<ws>.<name>. It picks one connection account of ws with a
// subscription on that subject, the serving accounts of ws taken in turn,
// and requests plaudit.judgeconn.<n>.<name>, which the server maps to
// plaudit.judge.<ws>.<name> in that account only: one worker connection
// (e.g. nats --token KEY reply plaudit.judge.<ws>.tone '{"met": true}')
// serves each request, never every worker. A plain request on
// plaudit.judge.> from Plaudit's connection reaches no one.
//
// A key is checked when its connection opens; Disconnect closes the open
// connections of a key that is revoked.
//
// A request reaching the service from a connection carries the
// Nats-Request-Info header, set by the server, naming the connection
// account; Embedded.Requester reads it, maps the account to its workspace
// and key, and says how far it can be trusted.
//
// Remaining limits. A client writing raw protocol can make the service read
// a Nats-Request-Info of its choosing, naming another connection account
// of its own workspace and that account's key, never another workspace's
// (see Requester). A connection account handed to a new connection of the
// same key may still get a late reply to a request of the key's previous,
// closed connection. Connection accounts are never removed: the pool of a
// key keeps its peak number of connections, revoked keys included.
package natsdoor
