// Package testcerts generates, at test time, a throwaway certificate
// authority with a server certificate for 127.0.0.1/localhost and client
// certificates, written as PEM files into a test's temporary directory. No
// private key is ever committed: each test run makes its own. For tests
// only.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a generated certificate authority.
type CA struct {
	Cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	File   string // PEM of the CA certificate
	dir    string
	serial int64
	tb     testing.TB
}

// Pair is a certificate and key written as PEM files.
type Pair struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
}

// NewCA makes a CA in dir (t.TempDir() if empty).
func NewCA(tb testing.TB, dir string) *CA {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "weir test CA", Organization: []string{"weir tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, key: key, dir: dir, serial: 1, tb: tb, File: filepath.Join(dir, "ca.pem")}
	writePEM(tb, ca.File, "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost,
// written to <name>.pem and <name>-key.pem.
func (ca *CA) Server(name string) Pair {
	return ca.issue(name, pkix.Name{CommonName: "localhost"}, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with the given subject.
func (ca *CA) Client(name string, subject pkix.Name) Pair {
	return ca.issue(name, subject, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(name string, subject pkix.Name, usage x509.ExtKeyUsage) Pair {
	tb := ca.tb
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem")}
	p.Cert, _ = x509.ParseCertificate(der)
	writePEM(tb, p.CertFile, "CERTIFICATE", der)
	writePEM(tb, p.KeyFile, "PRIVATE KEY", kder)
	return p
}

// Pool is a cert pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ClientTLS is a client tls.Config trusting the CA, presenting pair if
// given.
func (ca *CA) ClientTLS(pair *Pair) *tls.Config {
	c := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if pair != nil {
		kp, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
		if err != nil {
			ca.tb.Fatal(err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}
