package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/auth"
)

// SASL on SASL_PLAINTEXT and SASL_SSL listeners (Kafka's
// SaslServerAuthenticator, KIP-43, KIP-152, KIP-368):
//
//   - Until authenticated, a connection may send ApiVersions,
//     SaslHandshake and SaslAuthenticate only; any other request closes it
//     (as Kafka does in its handshake state).
//   - SaslHandshake (v1) picks the mechanism: an unknown or disabled one is
//     answered UNSUPPORTED_SASL_MECHANISM with the enabled list, then the
//     connection is closed. A second handshake before the exchange ended
//     is ILLEGAL_SASL_STATE (answered, then closed), and so is a
//     SaslAuthenticate without a handshake.
//   - SaslAuthenticate (v0-2) carries the mechanism's messages. A failed
//     exchange (wrong password, unknown user, invalid or expired token,
//     malformed message) is answered SASL_AUTHENTICATION_FAILED with a
//     message that names no credential, after
//     SASLConfig.FailedAuthDelay (connection.failed.authentication.delay.ms),
//     then the connection is closed: a password-guessing loop pays the
//     delay and a new connection per guess, and only its own connection
//     waits (the delay runs on that connection's read loop).
//   - On success, v1+ answers SessionLifetimeMs: connections.max.reauth.ms
//     (SASLConfig.MaxReauth), shortened to the token's remaining life for
//     OAUTHBEARER, or 0 (no expiry) when MaxReauth is 0, as Kafka. Past the
//     lifetime, any request but a re-authentication closes the connection.
//     Re-authentication (a new SaslHandshake + SaslAuthenticate on the
//     authenticated connection) must use the same mechanism and end with
//     the same principal, else it fails as above. v0 clients cannot
//     re-authenticate and get no lifetime (KIP-368).
//   - After a SaslHandshake v0 the exchange continues with raw tokens, not
//     requests (KIP-43; kafka-python 2.0 still does this): each frame is a
//     size and a token, answered the same way, without header. A failure
//     closes the connection without an answer (there is no place for an
//     error code), after the same delay. No lifetime: v0 clients cannot
//     re-authenticate.
//
// The SASL requests of a SASL listener are handled on the connection's
// read loop, in order: the state they change is read by the next request
// read, with no lock. The principal is set before any request other than
// ApiVersions is dispatched, and re-authentication cannot change it.

// SASLConfig configures SASL on the SASL listeners.
type SASLConfig struct {
	// Mechanisms enabled (sasl.enabled.mechanisms). Default: PLAIN,
	// SCRAM-SHA-256 and SCRAM-SHA-512, plus OAUTHBEARER when OAuth has a
	// JWKS. PLAIN and SCRAM check the SCRAM credentials of the broker's
	// store (AlterUserScramCredentials, `weir user`).
	Mechanisms []string
	// OAuth configures OAUTHBEARER token validation.
	OAuth OAuthConfig
	// MaxReauth is connections.max.reauth.ms: the longest an
	// authentication is valid before the client must re-authenticate
	// (0: no limit).
	MaxReauth time.Duration
	// FailedAuthDelay is connection.failed.authentication.delay.ms:
	// how long a failed authentication waits before it is answered and
	// the connection closed (default 100ms; negative: none).
	FailedAuthDelay time.Duration
}

// OAuthConfig configures OAUTHBEARER: JWTs signed by a key of the JWKS,
// with the issuer and audience given (when set) and an exp in the future.
type OAuthConfig struct {
	JWKSFile string // read again when it changes
	JWKSURL  string // fetched at start, refreshed every 5 minutes
	Issuer   string
	Audience string
	// PrincipalClaim names the claim holding the user name (default "sub").
	PrincipalClaim string
	// ClockSkew tolerated on exp/nbf/iat (default 30s).
	ClockSkew time.Duration
	// AllowUnsecuredTokens accepts unsecured JWTs ("alg":"none"), as
	// Kafka's default OAUTHBEARER validator does: anyone can then claim
	// any principal. For tests and development only; logged loudly.
	AllowUnsecuredTokens bool
}

func (o OAuthConfig) enabled() bool {
	return o.JWKSFile != "" || o.JWKSURL != "" || o.AllowUnsecuredTokens
}

// saslSetup prepares the broker's SASL state: the enabled mechanisms and
// the OAUTHBEARER key source. It runs at Start whether or not a listener
// uses SASL, so a bad setting fails early.
func (b *Broker) saslSetup(ctx context.Context) error {
	cfg := b.cfg.SASL
	secret, err := loadScramDecoyKey(b.cfg.FS, b.cfg.DataDir) // scram_decoy.go
	if err != nil {
		return fmt.Errorf("sasl: %w", err)
	}
	b.scramSecret = secret
	if cfg.OAuth.enabled() {
		jc := auth.JWTConfig{Issuer: cfg.OAuth.Issuer, Audience: cfg.OAuth.Audience,
			PrincipalClaim: cfg.OAuth.PrincipalClaim, ClockSkew: cfg.OAuth.ClockSkew, Now: b.cfg.Now,
			AllowUnsecured: cfg.OAuth.AllowUnsecuredTokens}
		if jc.AllowUnsecured {
			b.logger.Warn("OAUTHBEARER accepts UNSECURED tokens: any client can claim any principal (tests and development only)")
		}
		var err error
		switch {
		case cfg.OAuth.JWKSFile != "" && cfg.OAuth.JWKSURL != "":
			return errors.New("sasl: set one of OAuth.JWKSFile and OAuth.JWKSURL")
		case cfg.OAuth.JWKSFile != "":
			jc.Keys, err = auth.OpenJWKSFile(cfg.OAuth.JWKSFile)
		case cfg.OAuth.JWKSURL != "":
			jc.Keys, err = auth.OpenJWKSURL(ctx, cfg.OAuth.JWKSURL, nil, 0)
		}
		if err != nil {
			return fmt.Errorf("sasl: oauth: %w", err)
		}
		b.jwt = &jc
	}
	mechs := cfg.Mechanisms
	if len(mechs) == 0 {
		mechs = []string{auth.Plain, auth.ScramSHA256, auth.ScramSHA512}
		if b.jwt != nil {
			mechs = append(mechs, auth.OAuthBearer)
		}
	}
	for _, m := range mechs {
		switch m {
		case auth.Plain, auth.ScramSHA256, auth.ScramSHA512:
		case auth.OAuthBearer:
			if b.jwt == nil {
				return errors.New("sasl: OAUTHBEARER needs OAuth.JWKSFile or OAuth.JWKSURL")
			}
		default:
			return fmt.Errorf("sasl: unsupported mechanism %q (supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)", m)
		}
	}
	b.saslMechs = slices.Clone(mechs)
	if b.cfg.SASL.FailedAuthDelay == 0 {
		b.cfg.SASL.FailedAuthDelay = 100 * time.Millisecond
	}
	return nil
}

// newSASLSession starts the server side of mech.
func (b *Broker) newSASLSession(mech string) (auth.Session, error) {
	switch mech {
	case auth.Plain:
		return auth.NewPlainSession(b.scram), nil
	case auth.ScramSHA256, auth.ScramSHA512:
		return auth.NewScramSession(mech, b.scram, b.scramSecret)
	case auth.OAuthBearer:
		if b.jwt != nil {
			return auth.NewOAuthSession(*b.jwt), nil
		}
	}
	return nil, fmt.Errorf("mechanism %q not enabled", mech)
}

// anonymous is the principal of a connection that has not authenticated.
const anonymous = "User:ANONYMOUS"

// saslConn is the SASL state of a connection on a SASL listener. Read loop
// only.
type saslConn struct {
	mech          string       // of the last handshake
	sess          auth.Session // exchange in progress (nil: none)
	handshakeV    int16
	raw           bool // the next frames are raw tokens (handshake v0)
	authenticated bool
	expires       time.Time // zero: never
}

// saslGate runs before a request of a SASL listener's connection is
// dispatched. handled: the gate answered (or refused) the request itself;
// keep false: the connection must close (after the queued responses).
func (c *conn) saslGate(s *slot, req kmsg.Request) (handled, keep bool) {
	st := c.sasl
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		return false, true
	case *kmsg.SASLHandshakeRequest:
		return true, c.saslHandshake(s, r)
	case *kmsg.SASLAuthenticateRequest:
		return true, c.saslAuthenticate(s, r)
	}
	if !st.authenticated {
		c.logger.Info("closing connection: request before SASL authentication", "api", s.api.name)
		return true, false
	}
	if !st.expires.IsZero() && c.b.cfg.Now().After(st.expires) {
		c.logger.Info("closing connection: SASL session expired without re-authentication", "principal", c.principal, "api", s.api.name)
		return true, false
	}
	return false, true
}

func (c *conn) saslHandshake(s *slot, req *kmsg.SASLHandshakeRequest) bool {
	st := c.sasl
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = slices.Clone(c.saslMechanisms()) // listener_security.go
	switch {
	case st.sess != nil || (!st.authenticated && st.mech != ""):
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.logger.Info("closing connection: SaslHandshake during a SASL exchange")
		return c.answerAndClose(s, resp)
	case !slices.Contains(c.saslMechanisms(), req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.logger.Info("closing connection: SASL mechanism not enabled", "mechanism", req.Mechanism)
		return c.answerAndClose(s, resp)
	case st.authenticated && req.Mechanism != st.mech:
		// KIP-368: re-authentication keeps the mechanism.
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		resp.SupportedMechanisms = []string{st.mech}
		c.logger.Info("closing connection: re-authentication with another mechanism", "mechanism", req.Mechanism, "was", st.mech)
		return c.answerAndClose(s, resp)
	}
	sess, err := c.b.newSASLSession(req.Mechanism)
	if err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return c.answerAndClose(s, resp)
	}
	st.mech, st.sess, st.handshakeV = req.Mechanism, sess, req.Version
	st.raw = req.Version == 0
	return c.answer(s, resp)
}

// saslMaxReceive bounds every frame a SASL listener's connection sends
// before it is authenticated, requests and raw tokens alike (Kafka's
// sasl.server.max.receive.size): a stranger cannot make the broker read
// 100 MiB requests. A SCRAM message or a JWT is well under it.
const saslMaxReceive = 512 << 10

// saslRawToken reads and handles one raw token of size bytes (the
// SaslHandshake v0 flow). It returns false when the connection must
// close.
func (c *conn) saslRawToken(size int32) bool {
	st := c.sasl
	if size < 0 || size > saslMaxReceive {
		c.logger.Warn("closing connection: bad SASL token size", "size", size)
		return false
	}
	token, err := readFrame(c.nc, int(size))
	if err != nil {
		return false
	}
	reply, done, err := st.sess.Step(token)
	if err == nil && done && st.authenticated && st.sess.Principal() != c.principal {
		err = errors.New("Cannot change principals during re-authentication")
	}
	if err != nil {
		c.b.metrics.authentications.WithLabelValues(st.mech, "failure").Inc()
		c.logger.Info("closing connection: SASL authentication failed", "mechanism", st.mech, "err", err.Error())
		c.failedAuthDelay()
		return false
	}
	if done {
		if !st.authenticated {
			// Written once: handlers may be reading it from now on.
			c.principal = st.sess.Principal()
			c.logger.Info("authenticated", "principal", c.principal, "mechanism", st.mech)
		}
		st.authenticated, st.sess, st.raw, st.expires = true, nil, false, time.Time{}
		c.b.metrics.authentications.WithLabelValues(st.mech, "success").Inc()
	}
	s := &slot{api: lookupAPI(int16(kmsg.SASLAuthenticate)), done: make(chan struct{}), rawToken: true, raw: reply}
	close(s.done)
	return c.enqueue(s)
}

// failedAuthDelay waits SASLConfig.FailedAuthDelay (or until the
// connection ends) before a failure is answered.
func (c *conn) failedAuthDelay() {
	if d := c.b.cfg.SASL.FailedAuthDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.ctx.Done():
		}
	}
}

func (c *conn) saslAuthenticate(s *slot, req *kmsg.SASLAuthenticateRequest) bool {
	st := c.sasl
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if st.sess == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake naming the mechanism")
		c.logger.Info("closing connection: SaslAuthenticate without SaslHandshake")
		return c.answerAndClose(s, resp)
	}
	reply, done, err := st.sess.Step(req.SASLAuthBytes)
	if err == nil && !done {
		resp.SASLAuthBytes = reply
		return c.answer(s, resp)
	}
	now := c.b.cfg.Now()
	var lifetime time.Duration
	if err == nil {
		principal := st.sess.Principal()
		lifetime = c.maxReauth()
		if exp := st.sess.Expiry(); lifetime > 0 && !exp.IsZero() {
			lifetime = min(lifetime, exp.Sub(now))
		}
		switch {
		case st.authenticated && principal != c.principal:
			err = errors.New("Cannot change principals during re-authentication")
		case c.maxReauth() > 0 && lifetime <= 0:
			err = errors.New("Authentication failed: credential expired")
		}
		if err == nil {
			resp.SASLAuthBytes = reply
			if req.Version >= 1 && lifetime > 0 {
				resp.SessionLifetimeMillis = lifetime.Milliseconds()
				st.expires = now.Add(lifetime)
			} else {
				st.expires = time.Time{}
			}
			if !st.authenticated {
				// Written once: a re-authentication keeps it
				// (checked above), and handlers read it unlocked.
				c.principal = principal
				c.logger.Info("authenticated", "principal", principal, "mechanism", st.mech)
			} else {
				c.logger.Debug("re-authenticated", "principal", principal, "mechanism", st.mech)
			}
			st.authenticated, st.sess = true, nil
			c.b.metrics.authentications.WithLabelValues(st.mech, "success").Inc()
			return c.answer(s, resp)
		}
	}
	// The message is the mechanism's, which never carries a credential.
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	resp.ErrorMessage = kmsg.StringPtr(err.Error())
	c.b.metrics.authentications.WithLabelValues(st.mech, "failure").Inc()
	c.logger.Info("closing connection: SASL authentication failed", "mechanism", st.mech, "err", err.Error())
	st.sess = nil
	c.failedAuthDelay()
	return c.answerAndClose(s, resp)
}

// answer queues resp as the response of s.
func (c *conn) answer(s *slot, resp kmsg.Response) bool {
	return c.enqueue(c.finished(s.api, s.corr, resp))
}

// answerAndClose queues resp and returns false: the read loop ends, the
// queued responses are written, and the connection is closed.
func (c *conn) answerAndClose(s *slot, resp kmsg.Response) bool {
	c.answer(s, resp)
	return false
}

// Authenticate checks a user name and password against the SCRAM
// credentials, as a PLAIN login does, and returns the user's principal
// ("User:<name>"). It is for the broker's other front doors (HTTP basic
// auth of the admin API and the like). A failure takes as long as a
// success and says nothing of why.
func (b *Broker) Authenticate(user, password string) (principal string, ok bool) {
	sess := auth.NewPlainSession(b.scram)
	if _, done, err := sess.Step([]byte("\x00" + user + "\x00" + password)); err != nil || !done {
		return "", false
	}
	return sess.Principal(), true
}
