package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/weirhq/weir/broker"
)

// startWeir runs weir's broker with its default sync policy (an acks=all
// produce is answered after its data is fsynced).
func startWeir(ctx context.Context, dir string, logger *slog.Logger) (*running, error) {
	b, err := broker.Start(ctx, broker.Config{
		DataDir:   dir,
		KafkaAddr: "127.0.0.1:0",
		Logger:    logger,
	})
	if err != nil {
		return nil, err
	}
	return &running{addr: b.Addr(), close: b.Close}, nil
}

// startWeirTLS runs weir with one SSL listener whose self-signed
// certificate (for 127.0.0.1) is made now and written into dir, where the
// driver reads it to trust it (weirTLSClientConfig).
func startWeirTLS(ctx context.Context, dir string, logger *slog.Logger) (*running, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "brokerbench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certFile, keyFile := filepath.Join(dir, "tls-cert.pem"), filepath.Join(dir, "tls-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return nil, err
	}
	// The SSL listener is the target's address; a PLAINTEXT listener on
	// the same broker serves the TLS comparison phase (--tls-compare),
	// its address in plaintextAddrFile.
	b, err := broker.Start(ctx, broker.Config{
		DataDir: dir,
		Listeners: []broker.Listener{
			{Name: "SSL", Addr: "127.0.0.1:0", Protocol: broker.SSL},
			{Name: "PLAINTEXT", Addr: "127.0.0.1:0", Protocol: broker.Plaintext},
		},
		TLS:    broker.TLSConfig{CertFile: certFile, KeyFile: keyFile},
		Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, plaintextAddrFile), []byte(b.ListenerAddr("PLAINTEXT")), 0o600); err != nil {
		b.Close()
		return nil, err
	}
	return &running{addr: b.ListenerAddr("SSL"), close: b.Close}, nil
}

// plaintextAddrFile (in the weir-tls child's directory) holds the address
// of its PLAINTEXT listener.
const plaintextAddrFile = "plaintext-addr"

// weirTLSClientConfig trusts the certificate startWeirTLS wrote into dir.
func weirTLSClientConfig(dir string) (*tls.Config, error) {
	pemData, err := os.ReadFile(filepath.Join(dir, "tls-cert.pem"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("no certificate in %s", dir)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
