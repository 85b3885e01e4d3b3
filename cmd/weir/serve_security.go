package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/weirhq/weir/broker"
)

// securityOptions are weir serve's listener, TLS and SASL settings. Their
// flag names are Kafka's property names with '.' as '-', so a config file
// can use Kafka's keys ("listeners", "advertised.listeners",
// "listener.security.protocol.map", "sasl.enabled.mechanisms",
// "connections.max.reauth.ms").
type securityOptions struct {
	listeners        string
	advertised       string
	protocolMap      string
	tlsCert          string
	tlsKey           string
	tlsClientCA      string
	tlsClientAuth    string
	saslMechanisms   []string
	maxReauthMs      int64
	oauthJWKSFile    string
	oauthJWKSURL     string
	oauthIssuer      string
	oauthAudience    string
	oauthPrincipal   string
	failedAuthDelayM int64
	oauthUnsecured   bool

	// perListener holds the config file's listener.name.<name>.<setting>
	// keys (normalized), resolved against the listeners by apply.
	perListener map[string]string
}

func (s *securityOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&s.listeners, "listeners", "", `Kafka listeners, NAME://host:port comma separated (e.g. "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093"); replaces --kafka-addr`)
	f.StringVar(&s.advertised, "advertised-listeners", "", "addresses advertised per listener, NAME://host:port comma separated (advertised.listeners)")
	f.StringVar(&s.protocolMap, "listener-security-protocol-map", "", "NAME:PROTOCOL pairs for listeners not named after their protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)")
	f.StringVar(&s.tlsCert, "tls-cert", "", "PEM certificate (chain) of the SSL and SASL_SSL listeners; reloaded when it changes")
	f.StringVar(&s.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&s.tlsClientCA, "tls-client-ca", "", "PEM CA bundle client certificates are verified against (mTLS; the certificate subject is the principal on SSL listeners)")
	f.StringVar(&s.tlsClientAuth, "tls-client-auth", "", `ssl.client.auth: "required" (default with --tls-client-ca), "requested" or "none"`)
	f.StringSliceVar(&s.saslMechanisms, "sasl-enabled-mechanisms", nil, "SASL mechanisms of the SASL listeners (default PLAIN,SCRAM-SHA-256,SCRAM-SHA-512, plus OAUTHBEARER with a JWKS)")
	f.Int64Var(&s.maxReauthMs, "connections-max-reauth-ms", 0, "longest a SASL authentication lasts before the client must re-authenticate (KIP-368); 0: no limit")
	f.Int64Var(&s.failedAuthDelayM, "connection-failed-authentication-delay-ms", 100, "delay before a failed authentication is answered and its connection closed")
	f.StringVar(&s.oauthJWKSFile, "oauth-jwks-file", "", "JWKS file whose keys sign OAUTHBEARER tokens (reloaded when it changes)")
	f.StringVar(&s.oauthJWKSURL, "oauth-jwks-url", "", "JWKS URL whose keys sign OAUTHBEARER tokens (refreshed every 5 minutes)")
	f.StringVar(&s.oauthIssuer, "oauth-issuer", "", "required iss claim of OAUTHBEARER tokens")
	f.StringVar(&s.oauthAudience, "oauth-audience", "", "required aud claim of OAUTHBEARER tokens")
	f.StringVar(&s.oauthPrincipal, "oauth-principal-claim", "sub", "claim of OAUTHBEARER tokens naming the principal")
	f.BoolVar(&s.oauthUnsecured, "oauth-allow-unsecured-tokens", false, `accept unsigned ("alg":"none") OAUTHBEARER tokens, as Kafka's default validator: anyone can claim any principal (tests only)`)
}

// apply sets the security part of cfg. With --listeners, cfg's
// KafkaAddr and AdvertisedAddr are not used.
func (s *securityOptions) apply(cfg *broker.Config) error {
	if s.listeners != "" {
		ls, err := broker.ParseListeners(s.listeners, s.advertised, s.protocolMap)
		if err != nil {
			return err
		}
		cfg.Listeners = ls
	} else if s.advertised != "" || s.protocolMap != "" {
		return fmt.Errorf("--advertised-listeners and --listener-security-protocol-map need --listeners")
	}
	cfg.TLS = broker.TLSConfig{CertFile: s.tlsCert, KeyFile: s.tlsKey, ClientCAFile: s.tlsClientCA, ClientAuth: s.tlsClientAuth}
	if s.maxReauthMs < 0 {
		return fmt.Errorf("--connections-max-reauth-ms must not be negative")
	}
	delay := time.Duration(s.failedAuthDelayM) * time.Millisecond
	if delay <= 0 {
		delay = -1 // the broker reads 0 as its default
	}
	var mechs []string
	for _, m := range s.saslMechanisms {
		mechs = append(mechs, strings.ToUpper(strings.TrimSpace(m)))
	}
	cfg.SASL = broker.SASLConfig{
		Mechanisms:      mechs,
		MaxReauth:       time.Duration(s.maxReauthMs) * time.Millisecond,
		FailedAuthDelay: delay,
		OAuth: broker.OAuthConfig{JWKSFile: s.oauthJWKSFile, JWKSURL: s.oauthJWKSURL, Issuer: s.oauthIssuer,
			Audience: s.oauthAudience, PrincipalClaim: s.oauthPrincipal, AllowUnsecuredTokens: s.oauthUnsecured},
	}
	per, err := s.listenerSecurity(cfg.Listeners, cfg.TLS)
	if err != nil {
		return err
	}
	cfg.ListenerSecurity = per
	return nil
}

// listenerPrefix starts the config file keys of per-listener settings
// (Kafka's listener.name.<name>.<setting>, normalized).
const listenerPrefix = "listener-name-"

// takeListenerSettings moves the per-listener keys out of the config
// file's settings (they name no flag) into s.perListener.
func (s *securityOptions) takeListenerSettings(file map[string]string) {
	for k, v := range file {
		if strings.HasPrefix(k, listenerPrefix) {
			if s.perListener == nil {
				s.perListener = map[string]string{}
			}
			s.perListener[k] = v
			delete(file, k)
		}
	}
}

// listenerSettings are the settings a listener may override, by their
// normalized names (weir's flag names and Kafka's ssl.client.auth).
var listenerSettings = map[string]func(ls *broker.ListenerSecurity, tlsCfg *broker.TLSConfig, v string) error{
	"tls-cert":      func(_ *broker.ListenerSecurity, t *broker.TLSConfig, v string) error { t.CertFile = v; return nil },
	"tls-key":       func(_ *broker.ListenerSecurity, t *broker.TLSConfig, v string) error { t.KeyFile = v; return nil },
	"tls-client-ca": func(_ *broker.ListenerSecurity, t *broker.TLSConfig, v string) error { t.ClientCAFile = v; return nil },
	"tls-client-auth": func(_ *broker.ListenerSecurity, t *broker.TLSConfig, v string) error {
		t.ClientAuth = strings.ToLower(strings.TrimSpace(v))
		return nil
	},
	"ssl-client-auth": func(_ *broker.ListenerSecurity, t *broker.TLSConfig, v string) error {
		t.ClientAuth = strings.ToLower(strings.TrimSpace(v))
		return nil
	},
	"sasl-enabled-mechanisms": func(ls *broker.ListenerSecurity, _ *broker.TLSConfig, v string) error {
		ls.SASLMechanisms = []string{}
		for _, m := range strings.Split(v, ",") {
			if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
				ls.SASLMechanisms = append(ls.SASLMechanisms, m)
			}
		}
		return nil
	},
	"connections-max-reauth-ms": func(ls *broker.ListenerSecurity, _ *broker.TLSConfig, v string) error {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || ms < 0 {
			return fmt.Errorf("want milliseconds >= 0, got %q", v)
		}
		d := time.Duration(ms) * time.Millisecond
		ls.MaxReauth = &d
		return nil
	},
}

// listenerSecurity resolves the per-listener keys against the listeners:
// each key is listener.name.<listener>.<setting>; a listener's TLS
// settings start from the broker-wide ones (global).
func (s *securityOptions) listenerSecurity(ls []broker.Listener, global broker.TLSConfig) (map[string]broker.ListenerSecurity, error) {
	if len(s.perListener) == 0 {
		return nil, nil
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("config file: listener.name.* settings need --listeners")
	}
	type acc struct {
		sec    broker.ListenerSecurity
		tls    broker.TLSConfig
		hasTLS bool
	}
	byName := map[string]*acc{}
	keys := make([]string, 0, len(s.perListener))
	for k := range s.perListener {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		rest := strings.TrimPrefix(k, listenerPrefix)
		// The longest listener name that leaves a known setting: names
		// may hold '-' (normalized from '_' or '.').
		var name, setting string
		for _, l := range ls {
			n := normalizeKey(l.Name) + "-"
			if st, ok := strings.CutPrefix(rest, n); ok && listenerSettings[st] != nil && len(n) > len(name) {
				name, setting = l.Name, st
			}
		}
		if name == "" {
			return nil, fmt.Errorf("config file: %s: no listener of that name with a per-listener setting of that name "+
				"(settings: tls-cert, tls-key, tls-client-ca, ssl.client.auth, sasl.enabled.mechanisms, connections.max.reauth.ms)", k)
		}
		a := byName[name]
		if a == nil {
			a = &acc{tls: global}
			byName[name] = a
		}
		if strings.HasPrefix(setting, "tls-") || strings.HasPrefix(setting, "ssl-") {
			a.hasTLS = true
		}
		if err := listenerSettings[setting](&a.sec, &a.tls, s.perListener[k]); err != nil {
			return nil, fmt.Errorf("config file: %s: %w", k, err)
		}
	}
	out := make(map[string]broker.ListenerSecurity, len(byName))
	for name, a := range byName {
		if a.hasTLS {
			t := a.tls
			a.sec.TLS = &t
		}
		out[name] = a.sec
	}
	return out, nil
}

// certRequired reports whether a listener requires client certificates:
// its own TLS settings if it has some, else the broker-wide ones.
func certRequired(l broker.Listener, global broker.TLSConfig, per map[string]broker.ListenerSecurity) bool {
	t := global
	if sec, ok := per[l.Name]; ok && sec.TLS != nil {
		t = *sec.TLS
	}
	return t.ClientCAFile != "" && (t.ClientAuth == "" || t.ClientAuth == "required")
}

// exposedListeners returns the listeners that accept connections from
// other machines without authenticating the client: PLAINTEXT, or SSL
// without required client certificates, on an address that is not
// loopback.
func exposedListeners(ls []broker.Listener, tlsCfg broker.TLSConfig, per map[string]broker.ListenerSecurity) []broker.Listener {
	var out []broker.Listener
	for _, l := range ls {
		if l.Protocol.Authenticated(certRequired(l, tlsCfg, per)) {
			continue
		}
		host, _, err := net.SplitHostPort(l.Addr)
		if err != nil || !isLoopbackHost(host) {
			out = append(out, l)
		}
	}
	return out
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// warnExposed writes a banner to w (the terminal) and logs a warning for
// each listener anyone on the network can use without credentials.
func warnExposed(w io.Writer, logger *slog.Logger, ls []broker.Listener, tlsCfg broker.TLSConfig, per map[string]broker.ListenerSecurity) {
	for _, l := range exposedListeners(ls, tlsCfg, per) {
		fmt.Fprintf(w, "\n"+
			"!!! WARNING: listener %s on %s (%s) accepts clients WITHOUT AUTHENTICATION.\n"+
			"!!! Anyone who can reach this address can read, write and delete every topic.\n"+
			"!!! Use a SASL_SSL listener (weir user create ...) or SSL with --tls-client-ca, or listen on 127.0.0.1.\n\n",
			l.Name, l.Addr, l.Protocol)
		logger.Warn("listener accepts unauthenticated clients on a non-loopback address",
			"listener", l.Name, "addr", l.Addr, "protocol", string(l.Protocol))
	}
}
