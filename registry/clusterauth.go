package registry

import (
	"container/list"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/weirhq/weir/broker/auth"
)

// ClusterAuth authenticates and authorizes the REST API's requests with
// the Kafka cluster's own users and ACLs, for a registry that serves in
// front of a cluster it does not run (weir registry). It holds no
// credentials: it asks the cluster.
//
// Behavior:
//   - Basic auth (RFC 7617) is checked by logging in to the cluster as
//     that user with SASL (ClusterAuthConfig.Mechanism: SCRAM-SHA-512,
//     SCRAM-SHA-256 or PLAIN); the principal is User:<name>. A bearer
//     token (RFC 6750) is checked by logging in with OAUTHBEARER; the
//     principal is the cluster's, logged as User:<sub claim>.
//   - Authorization asks the cluster, over the login's own authenticated
//     connection, which operations the principal holds (KIP-430: Metadata
//     with IncludeTopicAuthorizedOperations for the topic of a subject,
//     DescribeCluster with IncludeClusterAuthorizedOperations for the
//     global settings), and applies the registry's mapping (KafkaACLs).
//     Whatever the cluster decides (super users, prefixed and wildcard
//     ACLs, DENY) is decided there.
//   - A verified client certificate (mTLS on the registry's front) has
//     the principal Kafka gives it (User: plus the subject in RFC 2253
//     form). The registry cannot log in as that principal, so it lists the
//     principal's ACLs with DescribeAcls over its own connection
//     (ClusterAuthConfig.ACLClientOpts, which needs DESCRIBE on the
//     cluster) and evaluates them as Kafka's authorizer does (mtlsacl.go);
//     ClusterAuthConfig.SuperUsers stands for the cluster's super.users.
//   - Without credentials: Required answers 401; otherwise the request is
//     asked of the cluster over a connection without SASL, as
//     User:ANONYMOUS, and a cluster that refuses those is 401 too.
//   - Logins are cached for TTL, successful and failed alike, keyed by an
//     HMAC of the credentials under a per-process random key (no password
//     or token is kept), at most MaxLogins (least recently used evicted,
//     its cluster connection closed), a bearer token's never past its exp;
//     so are each login's operations per topic. A repeated wrong password is answered from the cache without
//     asking the cluster again; after a failed login, a user's next
//     uncached attempt waits FailedLoginBackoff, doubling per failure up to
//     a minute and answered 401 with Retry-After meanwhile, so a client
//     guessing passwords in a loop reaches the cluster a few times a
//     minute at most.
//   - 401 carries WWW-Authenticate: Basic and Bearer challenges and
//     Confluent's error body; a cluster that cannot be reached is 503.
//     The Authorization header is removed before the registry's handlers
//     see the request; no password, token or header is ever logged.
//
// ClusterAuth is safe for concurrent use.
type ClusterAuth struct {
	cfg    ClusterAuthConfig
	secret [32]byte // keys the credential digests of the cache

	mu       sync.Mutex
	logins   map[[32]byte]*login
	lru      *list.List // of *login, most recently used first
	failures map[string]*failedUser
	closed   bool

	aclClientOnce sync.Once
	aclClient     *kgo.Client // lists mTLS principals' ACLs
	aclClientErr  error

	sem     chan struct{} // bounds the logins under way
	done    chan struct{} // closed by Close
	wg      sync.WaitGroup
	closing sync.WaitGroup // clients being closed
}

// ClusterAuthConfig configures a ClusterAuth.
type ClusterAuthConfig struct {
	// Brokers are the cluster's seed brokers.
	Brokers []string
	// ClientOpts connect the logins to the cluster (TLS): never SASL or a
	// client certificate, which would make every login the registry's
	// own principal.
	ClientOpts []kgo.Opt
	// ACLClientOpts connect the registry's own client that lists the
	// ACLs of mTLS principals (with its SASL or certificate). Nil: client
	// certificates on the front are not accepted.
	ACLClientOpts []kgo.Opt
	// SuperUsers are the cluster's super.users, for mTLS principals.
	SuperUsers []string
	// Mechanism is the SASL mechanism basic auth logs in with: PLAIN,
	// SCRAM-SHA-256 or SCRAM-SHA-512 (default).
	Mechanism string
	// Required refuses requests without credentials (401); otherwise they
	// are asked of the cluster as User:ANONYMOUS.
	Required bool
	// TTL is how long a login and its operations are cached (default 30s).
	TTL time.Duration
	// FailedLoginBackoff is the first wait after a user's failed login
	// (default 1s; it doubles per failure up to a minute).
	FailedLoginBackoff time.Duration
	// MaxLogins bounds the cached logins (default 256).
	MaxLogins int
	// Timeout bounds one round trip to the cluster (default 10s).
	Timeout time.Duration
	// Logger gets the authentication log (never a credential).
	Logger *slog.Logger
}

const (
	maxFailedLoginBackoff = time.Minute
	maxConcurrentLogins   = 16
	maxTopicsPerLogin     = 1024
	maxFailedUsers        = 4096
	anonymousPrincipal    = "User:ANONYMOUS"
)

// errBadCredentials: the cluster refused the login.
var errBadCredentials = errors.New("the cluster refused the credentials")

// login is one authenticated identity: its cluster connection and what
// the cluster said it may do. ready is closed once the login is decided;
// the fields below it are then read-only but for ops and clusterOps.
type login struct {
	key      [32]byte
	user     string    // "" for a bearer token or mTLS
	notAfter time.Time // the token's expiry (zero: none)
	elem     *list.Element
	ready    chan struct{}
	expires  time.Time

	principal string
	err       error // nil, errBadCredentials or why the cluster was not reached
	client    *kgo.Client
	acls      *principalACLs // mTLS: the principal's ACLs; client is nil

	mu         sync.Mutex
	ops        map[string]opsAt // topic -> operations
	clusterOps opsAt
}

type opsAt struct {
	bits uint32
	at   time.Time // zero: not asked yet
}

type failedUser struct {
	failures int
	until    time.Time
}

// NewClusterAuth returns a ClusterAuth; Close releases its connections.
func NewClusterAuth(cfg ClusterAuthConfig) (*ClusterAuth, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("cluster auth: no brokers")
	}
	if cfg.Mechanism == "" {
		cfg.Mechanism = auth.ScramSHA512
	}
	switch cfg.Mechanism {
	case auth.Plain, auth.ScramSHA256, auth.ScramSHA512:
	default:
		return nil, fmt.Errorf("cluster auth: mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", cfg.Mechanism)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 30 * time.Second
	}
	if cfg.FailedLoginBackoff <= 0 {
		cfg.FailedLoginBackoff = time.Second
	}
	if cfg.MaxLogins <= 0 {
		cfg.MaxLogins = 256
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &ClusterAuth{cfg: cfg, logins: map[[32]byte]*login{}, lru: list.New(),
		failures: map[string]*failedUser{}, sem: make(chan struct{}, maxConcurrentLogins), done: make(chan struct{})}
	if _, err := rand.Read(a.secret[:]); err != nil {
		return nil, err
	}
	a.wg.Add(1)
	go a.sweep()
	return a, nil
}

// Close closes every cached login's connection.
func (a *ClusterAuth) Close() {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	close(a.done)
	var clients []*kgo.Client
	for _, l := range a.logins {
		clients = append(clients, a.removeLocked(l)...)
	}
	a.mu.Unlock()
	a.wg.Wait()
	a.closeClients(clients)
	a.closing.Wait()
	a.aclClientOnce.Do(func() {}) // none is created after Close
	if a.aclClient != nil {
		a.aclClient.Close()
	}
}

// sweep drops expired logins, so that idle ones do not hold connections.
func (a *ClusterAuth) sweep() {
	defer a.wg.Done()
	t := time.NewTicker(a.cfg.TTL)
	defer t.Stop()
	for {
		select {
		case <-a.done:
			return
		case now := <-t.C:
			var clients []*kgo.Client
			a.mu.Lock()
			for _, l := range a.logins {
				if decided(l) && now.After(l.expires) {
					clients = append(clients, a.removeLocked(l)...)
				}
			}
			for u, f := range a.failures {
				if now.After(f.until.Add(maxFailedLoginBackoff)) {
					delete(a.failures, u)
				}
			}
			a.mu.Unlock()
			a.closeClients(clients)
		}
	}
}

func decided(l *login) bool {
	select {
	case <-l.ready:
		return true
	default:
		return false
	}
}

// removeLocked drops l from the cache and returns its client to close
// (outside the lock: closing waits for its connections). Lock held.
func (a *ClusterAuth) removeLocked(l *login) []*kgo.Client {
	if a.logins[l.key] != l {
		return nil
	}
	delete(a.logins, l.key)
	a.lru.Remove(l.elem)
	if decided(l) && l.client != nil {
		return []*kgo.Client{l.client}
	}
	return nil
}

// closeClients closes cs in the background (closing waits for their
// connections); Close waits for them.
func (a *ClusterAuth) closeClients(cs []*kgo.Client) {
	for _, c := range cs {
		a.closing.Add(1)
		go func() {
			defer a.closing.Done()
			c.Close()
		}()
	}
}

type loginKey struct{}

// Middleware authenticates the requests before next serves them (see the
// type's Behavior).
func (a *ClusterAuth) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, status, retryAfter := a.authenticate(r)
		switch status {
		case http.StatusOK:
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Basic realm="weir", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="weir"`)
			if retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
			}
			reason := "authentication required (basic auth, a bearer token or a client certificate)"
			if r.Header.Get("Authorization") != "" {
				reason = "invalid credentials"
			}
			writeError(w, newError(http.StatusUnauthorized, 401, "Unauthorized: %s", reason))
			return
		default:
			writeError(w, newError(http.StatusServiceUnavailable, CodeStoreError, "cannot reach the Kafka cluster to check the credentials"))
			return
		}
		r2 := r.WithContext(context.WithValue(r.Context(), loginKey{}, l))
		if r.Header.Get("Authorization") != "" {
			r2.Header = r.Header.Clone()
			r2.Header.Del("Authorization")
		}
		next.ServeHTTP(w, r2)
	})
}

// Principal is the principal Middleware authenticated r as ("" when r did
// not pass through it).
func Principal(r *http.Request) string {
	if l, ok := r.Context().Value(loginKey{}).(*login); ok {
		return l.principal
	}
	return ""
}

// authenticate returns the request's login, or the status to answer
// (401, with how long a throttled user must wait; 503).
func (a *ClusterAuth) authenticate(r *http.Request) (*login, int, time.Duration) {
	h := r.Header.Values("Authorization")
	var (
		key                 [32]byte
		user, principal, mk string
		mech                sasl.Mechanism
		notAfter            time.Time // zero: none
	)
	switch {
	case len(h) > 1:
		return nil, http.StatusUnauthorized, 0
	case len(h) == 1:
		if u, p, err := auth.ParseBasicAuth(h[0]); err == nil {
			user, principal, mk = u, auth.UserPrincipal(u), "basic"
			key = a.digest("basic", a.cfg.Mechanism, u, p)
			switch a.cfg.Mechanism {
			case auth.Plain:
				mech = plain.Auth{User: u, Pass: p}.AsMechanism()
			case auth.ScramSHA256:
				mech = scram.Auth{User: u, Pass: p}.AsSha256Mechanism()
			default:
				mech = scram.Auth{User: u, Pass: p}.AsSha512Mechanism()
			}
		} else if tok, ok := auth.BearerToken(h[0]); ok {
			principal, mk = tokenPrincipal(tok), "bearer"
			notAfter = tokenExpiry(tok)
			key = a.digest("bearer", tok)
			mech = oauth.Auth{Token: tok}.AsMechanism()
		} else {
			a.cfg.Logger.Info("http authentication failed: malformed Authorization header", "remote", r.RemoteAddr, "path", r.URL.Path)
			return nil, http.StatusUnauthorized, 0
		}
	default:
		if p, ok := auth.CertPrincipal(r.TLS); ok {
			if a.cfg.ACLClientOpts == nil {
				return nil, http.StatusUnauthorized, 0
			}
			principal, mk = p, "mtls"
			key = a.digest("mtls", p)
		} else if a.cfg.Required {
			return nil, http.StatusUnauthorized, 0
		} else {
			principal, mk = anonymousPrincipal, "anonymous"
			key = a.digest("anonymous")
		}
	}
	l, wait := a.lookup(key, user, principal, mk, mech, notAfter)
	if l == nil {
		a.cfg.Logger.Info("http authentication throttled after failed logins", "principal", principal, "remote", r.RemoteAddr, "retry_after", wait)
		return nil, http.StatusUnauthorized, wait
	}
	select {
	case <-l.ready:
	case <-r.Context().Done():
		return nil, http.StatusServiceUnavailable, 0
	}
	switch {
	case l.err == nil:
		return l, http.StatusOK, 0
	case errors.Is(l.err, errBadCredentials):
		a.cfg.Logger.Info("http authentication failed", "principal", principal, "remote", r.RemoteAddr, "path", r.URL.Path)
		return nil, http.StatusUnauthorized, 0
	default:
		a.cfg.Logger.Warn("http authentication: the cluster could not be asked", "principal", principal, "err", l.err)
		return nil, http.StatusServiceUnavailable, 0
	}
}

// digest keys the cache: an HMAC of the credentials under the per-process
// secret, so the cache holds nothing a password could be recovered from
// faster than by asking the cluster.
func (a *ClusterAuth) digest(parts ...string) [32]byte {
	m := hmac.New(sha256.New, a.secret[:])
	for _, p := range parts {
		m.Write([]byte(strconv.Itoa(len(p))))
		m.Write([]byte{':'})
		m.Write([]byte(p))
	}
	var k [32]byte
	copy(k[:], m.Sum(nil))
	return k
}

// lookup returns the cached login of key, or starts one; nil with the
// time left when user is throttled after failed logins.
// notAfter (zero: none) bounds how long the login is cached (a token's
// expiry).
func (a *ClusterAuth) lookup(key [32]byte, user, principal, kind string, mech sasl.Mechanism, notAfter time.Time) (*login, time.Duration) {
	now := time.Now()
	a.mu.Lock()
	if l, ok := a.logins[key]; ok {
		if !decided(l) || (now.Before(l.expires) && (l.err == nil || errors.Is(l.err, errBadCredentials))) {
			a.lru.MoveToFront(l.elem)
			a.mu.Unlock()
			return l, 0
		}
		old := a.removeLocked(l)
		defer a.closeClients(old)
	}
	if f := a.failures[user]; user != "" && f != nil && now.Before(f.until) {
		a.mu.Unlock()
		return nil, f.until.Sub(now)
	}
	l := &login{key: key, user: user, principal: principal, ready: make(chan struct{}), ops: map[string]opsAt{}, notAfter: notAfter}
	l.elem = a.lru.PushFront(l)
	a.logins[key] = l
	var evicted []*kgo.Client
	for a.lru.Len() > a.cfg.MaxLogins {
		evicted = append(evicted, a.removeLocked(a.lru.Back().Value.(*login))...)
	}
	a.mu.Unlock()
	a.closeClients(evicted)
	a.start(l, kind, mech)
	return l, 0
}

// start decides l: logs in to the cluster (or, for mTLS, lists the
// principal's ACLs) and closes l.ready.
func (a *ClusterAuth) start(l *login, kind string, mech sasl.Mechanism) {
	a.sem <- struct{}{}
	defer func() { <-a.sem }()
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Timeout)
	defer cancel()
	var err error
	if kind == "mtls" {
		l.acls, err = a.describeACLs(ctx, l.principal)
	} else {
		opts := append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...), kgo.ClientID("weir-registry-auth"),
			kgo.RetryTimeout(a.cfg.Timeout), kgo.RequestRetries(2)}, a.cfg.ClientOpts...)
		if mech != nil {
			opts = append(opts, kgo.SASL(mech))
		}
		l.client, err = kgo.NewClient(opts...)
		if err == nil {
			// A Metadata request naming no topic: it needs only the
			// login, and proves it.
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{}
			if _, err = req.RequestWith(ctx, l.client); err != nil {
				l.client.Close()
				l.client = nil
			}
		}
	}
	if err != nil && (kind == "anonymous" || isAuthFailure(err)) {
		err = fmt.Errorf("%w: %w", errBadCredentials, err)
	}
	a.mu.Lock()
	l.err = err
	l.expires = time.Now().Add(a.cfg.TTL)
	if !l.notAfter.IsZero() && l.notAfter.Before(l.expires) {
		l.expires = l.notAfter
	}
	switch {
	case l.user == "":
	case err == nil:
		delete(a.failures, l.user)
	case errors.Is(err, errBadCredentials):
		f := a.failures[l.user]
		if f == nil {
			if len(a.failures) >= maxFailedUsers {
				// A flood of user names must not grow the map without
				// bound: one entry (any) makes room.
				for u := range a.failures {
					delete(a.failures, u)
					break
				}
			}
			f = &failedUser{}
			a.failures[l.user] = f
		}
		backoff := a.cfg.FailedLoginBackoff << min(f.failures, 10)
		f.failures++
		f.until = time.Now().Add(min(backoff, maxFailedLoginBackoff))
	}
	close(l.ready)
	var stale []*kgo.Client
	if a.closed && l.client != nil {
		stale = append(stale, l.client)
	}
	a.mu.Unlock()
	a.closeClients(stale)
}

// isAuthFailure reports whether err is the cluster refusing the login
// (rather than not answering).
func isAuthFailure(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.IllegalSaslState) ||
		errors.Is(err, kerr.UnsupportedSaslMechanism) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// tokenClaims are the claims of a JWT bearer token the registry reads,
// without verifying them: the cluster verifies the token at the login.
type tokenClaims struct {
	Sub string  `json:"sub"`
	Exp float64 `json:"exp"`
}

func claimsOf(tok string) tokenClaims {
	var c tokenClaims
	if parts := strings.Split(tok, "."); len(parts) == 3 {
		if raw, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			_ = json.Unmarshal(raw, &c)
		}
	}
	return c
}

// tokenPrincipal is a bearer token's principal for the log: User: plus its
// sub claim.
func tokenPrincipal(tok string) string {
	if c := claimsOf(tok); c.Sub != "" {
		return auth.UserPrincipal(c.Sub)
	}
	return "User:(token)"
}

// tokenExpiry is a token's exp claim (zero: none): its login is not
// cached past it.
func tokenExpiry(tok string) time.Time {
	if c := claimsOf(tok); c.Exp > 0 {
		return time.Unix(int64(c.Exp), 0)
	}
	return time.Time{}
}

// Authorizer is the registry's Authorizer for requests Middleware
// authenticated: the KafkaACLs mapping decided by what the cluster says
// the login may do. A request that did not pass through Middleware, or
// whose operations the cluster does not answer, is refused.
func (a *ClusterAuth) Authorizer() Authorizer {
	return ACLAuthorizer(func(r *http.Request, op kmsg.ACLOperation, cluster bool, topic string) bool {
		l, ok := r.Context().Value(loginKey{}).(*login)
		if !ok {
			return false
		}
		if l.acls != nil {
			return l.acls.allowed(r, op, cluster, topic)
		}
		bits, err := a.operations(r.Context(), l, cluster, topic)
		if err != nil {
			a.cfg.Logger.Warn("registry authorization: the cluster could not be asked", "principal", l.principal, "topic", topic, "err", err)
			return false
		}
		return bits&(1<<uint(op)) != 0
	})
}

// operations returns the bit set (KIP-430: bit n is operation n) of what
// l may do on topic or on the cluster, cached for TTL.
func (a *ClusterAuth) operations(ctx context.Context, l *login, cluster bool, topic string) (uint32, error) {
	now := time.Now()
	l.mu.Lock()
	c := l.clusterOps
	if !cluster {
		c = l.ops[topic]
	}
	l.mu.Unlock()
	if !c.at.IsZero() && now.Sub(c.at) < a.cfg.TTL {
		return c.bits, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	bits, err := askOperations(ctx, l.client, cluster, topic)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	if cluster {
		l.clusterOps = opsAt{bits, now}
	} else {
		if len(l.ops) >= maxTopicsPerLogin {
			clear(l.ops)
		}
		l.ops[topic] = opsAt{bits, now}
	}
	l.mu.Unlock()
	return bits, nil
}

// askOperations asks the cluster over cl's connection what its principal
// may do. A topic or cluster the principal may not describe has no
// operations (Kafka reveals them only to principals with DESCRIBE).
func askOperations(ctx context.Context, cl *kgo.Client, cluster bool, topic string) (uint32, error) {
	if cluster {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		if resp.ErrorCode != 0 {
			if resp.ErrorCode == kerr.ClusterAuthorizationFailed.Code {
				return 0, nil
			}
			return 0, kerr.ErrorForCode(resp.ErrorCode)
		}
		return knownOps(resp.ClusterAuthorizedOperations), nil
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	req.IncludeTopicAuthorizedOperations = true
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		switch t.ErrorCode {
		case 0, kerr.UnknownTopicOrPartition.Code:
			return knownOps(t.AuthorizedOperations), nil
		case kerr.TopicAuthorizationFailed.Code, kerr.InvalidTopicException.Code:
			return 0, nil
		default:
			return 0, kerr.ErrorForCode(t.ErrorCode)
		}
	}
	return 0, fmt.Errorf("metadata response without topic %q", topic)
}

// knownOps: Kafka's "not provided" value (INT32_MIN) is no operation.
func knownOps(v int32) uint32 {
	if v < 0 {
		return 0
	}
	return uint32(v)
}
