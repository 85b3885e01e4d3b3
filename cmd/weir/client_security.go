package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// clientSecurity are the TLS and SASL settings of the client commands, for
// brokers whose listeners require them. The password and token are read
// from the environment or a file rather than the command line where
// possible (a command line is visible to every user of the machine).
type clientSecurity struct {
	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	saslMechanism string
	saslUser      string
	saslPassword  string
	saslTokenFile string
}

func addClientSecurityFlags(pf *pflag.FlagSet) *clientSecurity {
	s := &clientSecurity{}
	pf.BoolVar(&s.tls, "tls", false, "connect with TLS (implied by --tls-ca and --tls-cert)")
	pf.StringVar(&s.tlsCA, "tls-ca", "", "PEM CA bundle to verify the broker with (default: the system's)")
	pf.StringVar(&s.tlsCert, "tls-cert", "", "PEM client certificate for mTLS")
	pf.StringVar(&s.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	pf.StringVar(&s.saslMechanism, "sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	pf.StringVar(&s.saslUser, "sasl-user", "", "SASL user name")
	pf.StringVar(&s.saslPassword, "sasl-password", "", "SASL password (prefer WEIR_SASL_PASSWORD: a command line is visible to other users)")
	pf.StringVar(&s.saslTokenFile, "sasl-token-file", "", "file holding the OAUTHBEARER token (read at connect time)")
	return s
}

// kgoOpts are the client options for the settings.
func (s *clientSecurity) kgoOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	c, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	if c != nil {
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	if s.saslMechanism == "" {
		return opts, nil
	}
	pass := s.password()
	switch strings.ToUpper(s.saslMechanism) {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.saslUser, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.saslUser, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.saslUser, Pass: pass}.AsSha512Mechanism()))
	case "OAUTHBEARER":
		if s.saslTokenFile == "" {
			return nil, fmt.Errorf("--sasl-mechanism OAUTHBEARER needs --sasl-token-file")
		}
		tok, err := os.ReadFile(s.saslTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--sasl-token-file: %w", err)
		}
		opts = append(opts, kgo.SASL(oauth.Auth{Token: strings.TrimSpace(string(tok))}.AsMechanism()))
	default:
		return nil, fmt.Errorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", s.saslMechanism)
	}
	if s.saslUser == "" && !strings.EqualFold(s.saslMechanism, "OAUTHBEARER") {
		return nil, fmt.Errorf("--sasl-mechanism %s needs --sasl-user", s.saslMechanism)
	}
	return opts, nil
}

// tlsConfig is the TLS configuration of the flags; nil if they ask for no
// TLS.
func (s *clientSecurity) tlsConfig() (*tls.Config, error) {
	if !s.tls && s.tlsCA == "" && s.tlsCert == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.tlsCA != "" {
		pem, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: %s holds no PEM certificate", s.tlsCA)
		}
	}
	if s.tlsCert != "" || s.tlsKey != "" {
		kp, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}

// password is --sasl-password, or WEIR_SASL_PASSWORD.
func (s *clientSecurity) password() string {
	if s.saslPassword != "" {
		return s.saslPassword
	}
	return os.Getenv("WEIR_SASL_PASSWORD")
}
