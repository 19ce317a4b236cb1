// Package natsdoor is Plaudit's NATS door. Door (door.go) is a nats.go
// micro service named "plaudit" that translates each request on
// plaudit.v1.<ws>.<agent>.<op> into an api.Request (the subject names the
// workspace, agent and operation; the body carries the rest) and publishes
// the api.Response back, with the micro error headers. Embedded
// (embedded.go) makes the embedded nats-server multi-tenant.
//
// Embedded turns an embedded nats-server into a multi-tenant one without
// configuration files or JWTs. Every account lives in memory and is set up
// from Check, the server's custom client authentication:
//
//   - the service account (ServiceAccount) holds Plaudit's own connection,
//     which authenticates with an nkey generated at start and has every
//     permission;
//   - each workspace has an account named by its id, created on the first
//     connection of one of its API keys. It imports from the service account
//     the service subjects plaudit.v1.<ws>.> and the micro discovery subjects
//     $SRV.PING[.plaudit] and $SRV.INFO[.plaudit], and exports to it its judge
//     subjects plaudit.judge.<ws>.>;
//   - a client authenticates with an API key as its NATS token
//     (nats.Token(key), nats --token key) and lands in its workspace's account
//     as a user named by the key id. It may publish only on its workspace's
//     service subjects and the discovery subjects, answer requests it received
//     (a judge worker's reply), and subscribe only to _INBOX.> and its
//     workspace's judge subjects.
//
// Accounts share no subject space: a workspace sees nothing of another
// workspace's traffic, not even on _INBOX.>. Within one workspace, keys share
// the account, so one key may subscribe to _INBOX.> and see the replies meant
// for another key of the same workspace.
//
// A key is checked when its connection opens; Disconnect closes the open
// connections of a key that is revoked.
//
// A request reaching the service from a workspace carries the
// Nats-Request-Info header, set by the server, naming the workspace
// (account) and the key id (user); RequestInfo reads it, and says how far
// it can be trusted.
package natsdoor
