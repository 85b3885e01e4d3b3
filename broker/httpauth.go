package broker

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/weirhq/weir/broker/auth"
)

// Authentication of the broker's HTTP fronts (metrics, admin API, schema
// registry, stream query API), with the Kafka listeners' credentials:
//
//   - HTTP basic auth (RFC 7617) against the SCRAM users (weir user,
//     AlterUserScramCredentials): the password is checked as a SASL PLAIN
//     login checks it, by salting it with the stored salt and iteration
//     count and comparing the derived StoredKey in constant time; no
//     password or salted password is kept. An unknown user costs the same
//     work as a wrong password.
//   - A client certificate verified against the TLS client CA (mTLS): the
//     principal is "User:" plus the subject in RFC 2253 form, as on SSL
//     listeners.
//   - When OAUTHBEARER is configured (SASLConfig.OAuth), a bearer token
//     (RFC 6750) validated as OAUTHBEARER validates it (signature by a key
//     of the JWKS, issuer, audience, expiry): the principal is its
//     principal claim.
//
// Behavior of the middleware (HTTPAuthenticator):
//   - An Authorization header, when present, decides: Basic with a right
//     user and password authenticates as User:<name>, Bearer with a valid
//     token as its principal; anything else (a wrong password, an unknown
//     user, an invalid or expired token, another scheme, a malformed
//     header) is 401 with WWW-Authenticate: Basic (and Bearer when
//     OAUTHBEARER is configured), answered after
//     SASLConfig.FailedAuthDelay as a failed SASL login is. The header is
//     removed before the request reaches the handler.
//   - Without one, a verified client certificate authenticates.
//   - Without either: HTTPAuthRequired answers 401; HTTPAuthOptional
//     serves the request as User:ANONYMOUS (the ACLs then decide, as for a
//     PLAINTEXT Kafka connection).
//   - The principal is recorded with WithPrincipal; handlers apply the
//     ACLs with Authorized (authz_http.go), answering 403 when refused.
//   - Neither the password nor the header is ever logged or echoed.

// HTTPAuthMode says whether an HTTP front requires authentication.
type HTTPAuthMode string

const (
	// HTTPAuthRequired: every request must authenticate (basic auth, a
	// verified client certificate or a bearer token); others get 401.
	HTTPAuthRequired HTTPAuthMode = "required"
	// HTTPAuthOptional: credentials are checked when given (wrong ones get
	// 401); a request without any is User:ANONYMOUS.
	HTTPAuthOptional HTTPAuthMode = "optional"
)

// ParseHTTPAuthMode reads "required" or "optional".
func ParseHTTPAuthMode(s string) (HTTPAuthMode, error) {
	switch m := HTTPAuthMode(strings.ToLower(strings.TrimSpace(s))); m {
	case HTTPAuthRequired, HTTPAuthOptional:
		return m, nil
	}
	return "", fmt.Errorf("http auth %q: want required or optional", s)
}

// HTTPRealm is the realm of the WWW-Authenticate challenge.
const HTTPRealm = "weir"

// challenge is the WWW-Authenticate value of a 401 (RFC 7617 §2.1), and
// bearerChallenge the second one when bearer tokens are accepted (RFC 6750
// §3).
const (
	challenge       = `Basic realm="` + HTTPRealm + `", charset="UTF-8"`
	bearerChallenge = `Bearer realm="` + HTTPRealm + `"`
)

// HTTPAuthenticator returns the middleware that authenticates the requests
// of an HTTP front in mode (see the Behavior list above) before next
// serves them. Safe for concurrent use.
func (b *Broker) HTTPAuthenticator(mode HTTPAuthMode, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		principal, ok := b.httpPrincipal(r, mode)
		if !ok {
			w.Header().Set("WWW-Authenticate", challenge)
			if b.jwt != nil {
				w.Header().Add("WWW-Authenticate", bearerChallenge)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			// Confluent's error shape, which the schema registry's
			// clients read; others only look at the status.
			_, _ = fmt.Fprintf(w, "{\"error_code\":401,\"message\":\"Unauthorized: %s\"}\n", unauthorizedReason(r))
			return
		}
		r2 := r.WithContext(WithPrincipal(r.Context(), principal))
		if r.Header.Get("Authorization") != "" {
			r2.Header = r.Header.Clone()
			r2.Header.Del("Authorization")
		}
		next.ServeHTTP(w, r2)
	})
}

func unauthorizedReason(r *http.Request) string {
	if r.Header.Get("Authorization") != "" {
		return "invalid credentials"
	}
	return "authentication required (basic auth, a client certificate or a bearer token)"
}

// httpPrincipal authenticates r; false means 401. A failed check is
// answered after the failed-authentication delay (or when the client goes
// away), on the request's goroutine only.
func (b *Broker) httpPrincipal(r *http.Request, mode HTTPAuthMode) (string, bool) {
	if h := r.Header.Values("Authorization"); len(h) > 0 {
		mech := "HTTP_BASIC"
		if len(h) == 1 {
			if user, password, err := auth.ParseBasicAuth(h[0]); err == nil {
				if p, ok := b.Authenticate(user, password); ok {
					b.metrics.authentications.WithLabelValues(mech, "success").Inc()
					return p, true
				}
			} else if tok, ok := auth.BearerToken(h[0]); ok && b.jwt != nil {
				mech = "HTTP_BEARER"
				if t, err := auth.ValidateJWT(*b.jwt, tok); err == nil {
					b.metrics.authentications.WithLabelValues(mech, "success").Inc()
					return t.Principal, true
				}
			}
		}
		b.metrics.authentications.WithLabelValues(mech, "failure").Inc()
		// The reason is not logged: a user who typed the password into
		// the user field must not find it in the log.
		b.logger.Info("http authentication failed", "remote", r.RemoteAddr, "path", r.URL.Path)
		b.httpFailedAuthDelay(r)
		return "", false
	}
	if p, ok := CertPrincipal(r.TLS); ok {
		return p, true
	}
	if mode == HTTPAuthOptional {
		return anonymous, true
	}
	return "", false
}

func (b *Broker) httpFailedAuthDelay(r *http.Request) {
	if d := b.cfg.SASL.FailedAuthDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-b.ctx.Done():
		}
	}
}

// CertPrincipal is auth.CertPrincipal: the principal of a verified client
// certificate, as on SSL listeners.
func CertPrincipal(st *tls.ConnectionState) (string, bool) { return auth.CertPrincipal(st) }

// HTTPTLSConfig returns a server TLS configuration for an HTTP front with
// the Kafka listeners' certificate and key (Config.TLS), read again when
// the files change, as for the listeners. clientAuth is Kafka's
// ssl.client.auth for the front: "none", "requested" (a certificate is
// verified when presented, so basic auth and mTLS clients share the front)
// or "required"; "" is "requested" when Config.TLS has a client CA, else
// "none".
func (b *Broker) HTTPTLSConfig(clientAuth string) (*tls.Config, error) {
	r := b.tlsReload // written once during Start
	return httpTLSConfig(b.cfg.TLS, clientAuth, r, b)
}

// NewHTTPTLSConfig is HTTPTLSConfig for an HTTP front without a broker
// (weir registry): the certificate and key of cfg, read again when the
// files change, and its ClientCAFile for client certificates.
func NewHTTPTLSConfig(cfg TLSConfig, clientAuth string, logger *slog.Logger) (*tls.Config, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// newTLSReloader takes the broker for its logger only.
	return httpTLSConfig(cfg, clientAuth, nil, &Broker{logger: logger})
}

func httpTLSConfig(cfg TLSConfig, clientAuth string, r *tlsReloader, b *Broker) (*tls.Config, error) {
	if clientAuth == "" {
		clientAuth = "none"
		if cfg.ClientCAFile != "" {
			clientAuth = "requested"
		}
	}
	listenerCfg := cfg
	cfg.ClientAuth = clientAuth
	mode, err := cfg.clientAuthType()
	if err != nil {
		return nil, err
	}
	if r == nil {
		if r, err = newTLSReloader(listenerCfg, b); err != nil {
			return nil, err
		}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := r.config(true).Clone()
			c.ClientAuth = mode
			if mode == tls.NoClientCert {
				c.ClientCAs = nil
			}
			c.NextProtos = []string{"http/1.1"}
			return c, nil
		},
	}, nil
}
