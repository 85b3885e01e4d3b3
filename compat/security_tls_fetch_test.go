package compat

import (
	"bufio"
	"bytes"
	"crypto/x509/pkix"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Large fetches over TLS (issue 20): the broker writes a TLS connection's
// record sets through crypto/tls in 16 KiB records, gathered into 64 KiB
// socket writes (broker/tls.go). Records of up to 300 KB, about 12 MB over
// 3 partitions, written by the driver over PLAINTEXT, are read back over
// the SSL listener (client certificates) by kcat (librdkafka, OpenSSL) and
// by franz-go: every record once, every byte as written.
func TestLargeFetchOverSSL(t *testing.T) {
	kcat := requireTool(t, "kcat")
	s := startSecureWeir(t)
	const topic = "compat-ssl-large"
	createTopic(t, s.addr, topic, 3)
	rng := rand.New(rand.NewPCG(3, 4))
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var sent []string
	var recs []*kgo.Record
	for i := range 150 {
		size := []int{100, 5000, 60000, 300000}[rng.IntN(4)]
		v := make([]byte, size)
		for j := range v {
			v[j] = alnum[rng.IntN(len(alnum))]
		}
		copy(v, fmt.Sprintf("%06d:", i))
		sent = append(sent, string(v))
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: v})
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx := testContext(t, toolTimeout)
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	check := func(client string, got []string) {
		t.Helper()
		seen := make([]bool, len(sent))
		for _, v := range got {
			i, err := strconv.Atoi(v[:min(6, len(v))])
			if err != nil || i < 0 || i >= len(sent) || seen[i] {
				t.Fatalf("%s: unexpected or repeated record %.20q", client, v)
			}
			if v != sent[i] {
				t.Fatalf("%s: record %d differs (%d bytes, want %d)", client, i, len(v), len(sent[i]))
			}
			seen[i] = true
		}
		if len(got) != len(sent) {
			t.Fatalf("%s: read %d records of %d", client, len(got), len(sent))
		}
	}

	pair := s.ca.Client("reader", pkix.Name{CommonName: "reader"})
	conf := kcatConfig(t, s.dir, "ssl-large", map[string]string{
		"security.protocol": "SSL", "ssl.ca.location": s.ca.File,
		"ssl.certificate.location": pair.CertFile, "ssl.key.location": pair.KeyFile,
	})
	out := runToolRaw(t, nil, kcat, "-F", conf, "-C", "-b", s.listener("SSL"), "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%s\n", "-X", "fetch.message.max.bytes=4000000")
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	check("kcat", got)

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.listener("SSL")), kgo.DialTLSConfig(s.ca.ClientTLS(&pair)),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got = got[:0]
	for len(got) < len(sent) && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	check("franz-go", got)
}
