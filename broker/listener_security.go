package broker

import (
	"crypto/tls"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/broker/auth"
)

// Per-listener security, Kafka's listener.name.<name>.* overrides: a
// listener may have its own certificate and client-certificate setting
// (ssl.*), SASL mechanisms (sasl.enabled.mechanisms) and re-authentication
// limit (connections.max.reauth.ms). What a listener does not override is
// the broker-wide Config.TLS and Config.SASL. The overrides are resolved
// once at Start and read-only afterwards.

// ListenerSecurity overrides the broker-wide TLS and SASL settings for one
// listener (Config.ListenerSecurity, by listener name).
type ListenerSecurity struct {
	// TLS replaces Config.TLS on this listener, files reloaded on change
	// as the broker-wide ones. On a SASL_SSL listener a ClientAuth set
	// here asks for client certificates too (Kafka since KIP-684 honours
	// a listener-prefixed ssl.client.auth there); the principal still
	// comes from SASL.
	TLS *TLSConfig
	// SASLMechanisms replaces the enabled mechanisms on this listener
	// (each one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; the
	// last needs Config.SASL.OAuth).
	SASLMechanisms []string
	// MaxReauth replaces SASLConfig.MaxReauth on this listener.
	MaxReauth *time.Duration
}

// listenerSASL is a listener's resolved SASL settings.
type listenerSASL struct {
	mechs     []string
	maxReauth time.Duration
}

// resolveListenerSecurity checks Config.ListenerSecurity against the
// listeners and resolves each listener's SASL settings into b.lisSASL.
// After saslSetup.
func (b *Broker) resolveListenerSecurity(ls []Listener) error {
	byName := map[string]Listener{}
	for _, l := range ls {
		byName[l.Name] = l
	}
	b.lisSASL = map[string]listenerSASL{}
	for name, sec := range b.cfg.ListenerSecurity {
		l, ok := byName[name]
		if !ok {
			return fmt.Errorf("listener security for %s: no such listener", name)
		}
		if sec.TLS != nil && !l.Protocol.TLS() {
			return fmt.Errorf("listener %s (%s): TLS settings on a listener without TLS", name, l.Protocol)
		}
		if (sec.SASLMechanisms != nil || sec.MaxReauth != nil) && !l.Protocol.SASL() {
			return fmt.Errorf("listener %s (%s): SASL settings on a listener without SASL", name, l.Protocol)
		}
		if sec.TLS != nil {
			if _, err := sec.TLS.clientAuthType(); err != nil {
				return fmt.Errorf("listener %s: %w", name, err)
			}
		}
		r := listenerSASL{mechs: b.saslMechs, maxReauth: b.cfg.SASL.MaxReauth}
		if sec.SASLMechanisms != nil {
			if len(sec.SASLMechanisms) == 0 {
				return fmt.Errorf("listener %s: no SASL mechanism enabled", name)
			}
			for _, m := range sec.SASLMechanisms {
				switch m {
				case auth.Plain, auth.ScramSHA256, auth.ScramSHA512:
				case auth.OAuthBearer:
					if b.jwt == nil {
						return fmt.Errorf("listener %s: OAUTHBEARER needs OAuth.JWKSFile or OAuth.JWKSURL", name)
					}
				default:
					return fmt.Errorf("listener %s: unsupported SASL mechanism %q", name, m)
				}
			}
			r.mechs = slices.Clone(sec.SASLMechanisms)
		}
		if sec.MaxReauth != nil {
			if *sec.MaxReauth < 0 {
				return fmt.Errorf("listener %s: negative re-authentication limit", name)
			}
			r.maxReauth = *sec.MaxReauth
		}
		b.lisSASL[name] = r
	}
	return nil
}

// listenerTLS is the server TLS configuration of a TLS listener: its own
// reloader for overridden TLS settings, else the broker-wide one.
func (b *Broker) listenerTLS(l Listener) (*tls.Config, error) {
	if sec, ok := b.cfg.ListenerSecurity[l.Name]; ok && sec.TLS != nil {
		r, err := newTLSReloader(*sec.TLS, b)
		if err != nil {
			return nil, err
		}
		return r.serverConfig(l.Protocol == SSL || sec.TLS.ClientAuth != ""), nil
	}
	if b.tlsReload == nil {
		var err error
		if b.tlsReload, err = newTLSReloader(b.cfg.TLS, b); err != nil {
			return nil, err
		}
	}
	return b.tlsReload.serverConfig(l.Protocol == SSL), nil
}

// saslMechanisms are the mechanisms enabled on c's listener.
func (c *conn) saslMechanisms() []string {
	if c.lis != nil {
		if r, ok := c.b.lisSASL[c.lis.Name]; ok {
			return r.mechs
		}
	}
	return c.b.saslMechs
}

// maxReauth is connections.max.reauth.ms on c's listener.
func (c *conn) maxReauth() time.Duration {
	if c.lis != nil {
		if r, ok := c.b.lisSASL[c.lis.Name]; ok {
			return r.maxReauth
		}
	}
	return c.b.cfg.SASL.MaxReauth
}
