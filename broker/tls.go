package broker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// TLS for SSL and SASL_SSL listeners: the server certificate and key, and
// optionally a client CA bundle for mutual TLS, are PEM files read at
// Start and read again when any of them changes (checked at most once per
// second, on new connections), so certificates rotate without a restart;
// a change that does not load (a half-written file, a key that does not
// match) keeps the previous configuration and is logged. TLS 1.2 is the
// minimum; everything else is Go's defaults (cipher suites, curves).
//
// Client certificates are asked for on SSL listeners only: on SASL_SSL the
// client proves who it is with SASL (Kafka since KIP-684 ignores
// ssl.client.auth there unless set for that listener).
//
// With client certificates verified (mTLS), the principal of an SSL
// connection is "User:" plus the certificate subject's distinguished name
// in RFC 2253 form ("User:CN=alice,O=Acme"), as Kafka's default principal
// builder; without one it is User:ANONYMOUS. On SASL_SSL the principal
// comes from SASL.

// TLSConfig configures TLS for the SSL and SASL_SSL listeners.
type TLSConfig struct {
	// CertFile and KeyFile are the server's PEM certificate (chain) and
	// private key.
	CertFile, KeyFile string
	// ClientCAFile is a PEM bundle of CAs client certificates are
	// verified against; empty: no client certificates.
	ClientCAFile string
	// ClientAuth is Kafka's ssl.client.auth: "required" (the default
	// when ClientCAFile is set), "requested" (verified when presented) or
	// "none".
	ClientAuth string
}

// clientAuthType maps ClientAuth to Go's setting.
func (c TLSConfig) clientAuthType() (tls.ClientAuthType, error) {
	mode := c.ClientAuth
	if mode == "" {
		mode = "none"
		if c.ClientCAFile != "" {
			mode = "required"
		}
	}
	switch mode {
	case "none":
		return tls.NoClientCert, nil
	case "requested":
		if c.ClientCAFile == "" {
			return 0, errors.New("tls: ClientAuth requested needs ClientCAFile")
		}
		return tls.VerifyClientCertIfGiven, nil
	case "required":
		if c.ClientCAFile == "" {
			return 0, errors.New("tls: ClientAuth required needs ClientCAFile")
		}
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("tls: ClientAuth %q: want none, requested or required", c.ClientAuth)
}

// tlsReloader serves the current TLS configuration, reloading it when its
// files change. Safe for concurrent use.
type tlsReloader struct {
	cfg    TLSConfig
	auth   tls.ClientAuthType
	logger interface {
		Warn(msg string, args ...any)
		Info(msg string, args ...any)
	}

	mu      sync.Mutex
	current *tls.Config // for SSL listeners
	noAuth  *tls.Config // current without client certificates (SASL_SSL)
	stamp   []byte      // the files' sizes and modification times
	checked time.Time
}

func newTLSReloader(cfg TLSConfig, b *Broker) (*tlsReloader, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("tls: a TLS listener needs CertFile and KeyFile")
	}
	auth, err := cfg.clientAuthType()
	if err != nil {
		return nil, err
	}
	r := &tlsReloader{cfg: cfg, auth: auth, logger: b.logger}
	stamp, err := r.fileStamp()
	if err != nil {
		return nil, err
	}
	cur, err := r.load()
	if err != nil {
		return nil, err
	}
	r.install(cur)
	r.stamp, r.checked = stamp, time.Now()
	return r, nil
}

func (r *tlsReloader) files() []string {
	f := []string{r.cfg.CertFile, r.cfg.KeyFile}
	if r.cfg.ClientCAFile != "" {
		f = append(f, r.cfg.ClientCAFile)
	}
	return f
}

func (r *tlsReloader) fileStamp() ([]byte, error) {
	var b []byte
	for _, f := range r.files() {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		b = fmt.Appendf(b, "%s %d %d;", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return b, nil
}

func (r *tlsReloader) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		// The error names the files and what is wrong with the PEM,
		// never the key material.
		return nil, fmt.Errorf("tls: load %s / %s: %w", r.cfg.CertFile, r.cfg.KeyFile, err)
	}
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   r.auth,
	}
	if r.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(r.cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", r.cfg.ClientCAFile)
		}
		c.ClientCAs = pool
	}
	return c, nil
}

// install makes c current. mu must be held (or r not yet shared).
func (r *tlsReloader) install(c *tls.Config) {
	r.current = c
	r.noAuth = c.Clone()
	r.noAuth.ClientAuth, r.noAuth.ClientCAs = tls.NoClientCert, nil
}

// config returns the configuration for a new connection (with client
// certificates as configured when clientAuth, else without), reloading
// it first if a file changed.
func (r *tlsReloader) config(clientAuth bool) *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) >= time.Second {
		r.checked = time.Now()
		if stamp, err := r.fileStamp(); err == nil && !bytes.Equal(stamp, r.stamp) {
			if next, err := r.load(); err != nil {
				// Files being rewritten one after the other: try
				// again on the next check rather than keep the
				// half-new state.
				r.logger.Warn("tls: files changed but do not load; keeping the previous certificate", "err", err)
			} else {
				r.install(next)
				r.stamp = stamp
				r.logger.Info("tls: certificate reloaded", "cert", r.cfg.CertFile)
			}
		}
	}
	if clientAuth {
		return r.current
	}
	return r.noAuth
}

// serverConfig is the listener-level tls.Config: every handshake asks
// the reloader for the current one. clientAuth: the listener verifies
// client certificates as configured (SSL listeners).
func (r *tlsReloader) serverConfig(clientAuth bool) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.config(clientAuth), nil },
	}
}

// tlsHandshakeTimeout bounds a TLS handshake; a client that connects and
// says nothing is dropped after it.
const tlsHandshakeTimeout = 10 * time.Second

// handshake completes the TLS handshake of a TLS connection and sets the
// connection's principal from a verified client certificate on SSL
// listeners. It returns false (the connection is then closed) on failure.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			c.logger.Info("tls handshake failed", "err", err)
		}
		c.b.metrics.authentications.WithLabelValues("TLS", "failure").Inc()
		return false
	}
	st := tc.ConnectionState()
	if c.lis != nil && c.lis.Protocol == SSL && len(st.VerifiedChains) > 0 {
		c.principal = "User:" + st.PeerCertificates[0].Subject.String()
	}
	return true
}

// writeTLSBuffers writes a vectored response over TLS. Each Write of a
// tls.Conn ends a record, so writing the buffers one by one would send a
// record (and a syscall) per length prefix: small buffers are gathered,
// and a large one (a record set) is written as it is, which the TLS layer
// cuts into full records without a copy of ours. Write loop only.
func (c *conn) writeTLSBuffers(bufs net.Buffers) (int64, error) {
	var n int64
	small := c.tlsSmall[:0]
	flush := func() error {
		if len(small) == 0 {
			return nil
		}
		m, err := c.nc.Write(small)
		n += int64(m)
		small = small[:0]
		return err
	}
	for _, b := range bufs {
		if len(b) < tlsDirectMin {
			small = append(small, b...)
			continue
		}
		if err := flush(); err != nil {
			return n, err
		}
		m, err := c.nc.Write(b)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	err := flush()
	if cap(small) <= 64<<10 {
		c.tlsSmall = small[:0]
	}
	return n, err
}

// tlsDirectMin: buffers at least this large are written without being
// gathered (a full TLS record).
const tlsDirectMin = 16 << 10

// readBufferedConn buffers the reads of a TLS connection's socket. The
// TLS layer reads a record at a time (at most 16 KiB); through the buffer
// a large produce request costs one read syscall per tlsReadChunk rather
// than one per record.
type readBufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func newReadBufferedConn(nc net.Conn) net.Conn {
	return &readBufferedConn{Conn: nc, r: bufio.NewReaderSize(nc, tlsReadChunk)}
}

func (c *readBufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// tlsReadChunk is four maximum-size TLS records.
const tlsReadChunk = 64 << 10
