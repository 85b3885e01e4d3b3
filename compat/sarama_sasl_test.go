package compat

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saramaSCRAM adapts a SCRAM client to sarama's SCRAMClient interface
// (sarama ships none). It uses franz-go's SCRAM client, an implementation
// independent of weir's server.
type saramaSCRAM struct {
	sha512   bool
	mech     sasl.Mechanism
	sess     sasl.Session
	finished bool
}

func (s *saramaSCRAM) Begin(user, pass, _ string) error {
	a := scram.Auth{User: user, Pass: pass}
	s.mech = a.AsSha256Mechanism()
	if s.sha512 {
		s.mech = a.AsSha512Mechanism()
	}
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) {
	if s.sess == nil {
		sess, first, err := s.mech.Authenticate(context.Background(), "")
		s.sess = sess
		return string(first), err
	}
	done, next, err := s.sess.Challenge([]byte(challenge))
	s.finished = done
	return string(next), err
}

func (s *saramaSCRAM) Done() bool { return s.finished }

// sarama over SASL_SSL with SCRAM-SHA-512 and with PLAIN: produce and read
// back; a wrong password fails the connection with SASL_AUTHENTICATION_FAILED.
func TestSaramaSASLSSL(t *testing.T) {
	s := startSecureWeir(t)
	addr := s.listener("SASL_SSL")
	config := func(mech sarama.SASLMechanism, pass string) *sarama.Config {
		cfg := sarama.NewConfig()
		cfg.ClientID = "weir-compat-sasl"
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Retry.Max = 0
		cfg.Metadata.Retry.Max = 0
		cfg.Net.DialTimeout = 10 * time.Second
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = s.ca.ClientTLS(nil)
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = mech
		cfg.Net.SASL.User, cfg.Net.SASL.Password = secUser, pass
		if mech == sarama.SASLTypeSCRAMSHA512 {
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{sha512: true} }
		}
		return cfg
	}
	for _, mech := range []sarama.SASLMechanism{sarama.SASLTypeSCRAMSHA512, sarama.SASLTypePlaintext} {
		t.Run(string(mech), func(t *testing.T) {
			topic := "compat-sarama-" + strings.ToLower(string(mech))
			createTopic(t, s.addr, topic, numPartitions)
			cfg := config(mech, secPass)
			prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatalf("producer: %v", err)
			}
			defer prod.Close()
			sent := testRecords()[:30]
			var acked []record
			for _, r := range sent {
				p, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(r.Key), Value: sarama.StringEncoder(r.Value)})
				if err != nil {
					t.Fatalf("produce: %v", err)
				}
				acked = append(acked, record{Key: r.Key, Value: r.Value, Partition: p, Offset: off})
			}
			checkProduced(t, s.addr, topic, sent, acked, saramaHash)
			cons, err := sarama.NewConsumer([]string{addr}, cfg)
			if err != nil {
				t.Fatalf("consumer: %v", err)
			}
			defer cons.Close()
			msgs := make(chan *sarama.ConsumerMessage, len(sent))
			errs := make(chan error, numPartitions)
			for p := int32(0); p < numPartitions; p++ {
				pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
				if err != nil {
					t.Fatal(err)
				}
				defer pc.AsyncClose()
				go func() {
					for {
						select {
						case m, ok := <-pc.Messages():
							if !ok {
								return
							}
							msgs <- m
						case err, ok := <-pc.Errors():
							if ok {
								errs <- err
							}
							return
						}
					}
				}()
			}
			var got []record
			deadline := time.After(60 * time.Second)
			for len(got) < len(sent) {
				select {
				case m := <-msgs:
					got = append(got, record{Key: string(m.Key), Value: string(m.Value), Partition: m.Partition, Offset: m.Offset})
				case err := <-errs:
					t.Fatal(err)
				case <-deadline:
					t.Fatalf("read %d of %d", len(got), len(sent))
				}
			}
			checkConsumed(t, sent, acked, got, saramaHash)

			_, err = sarama.NewClient([]string{addr}, config(mech, "not-the-Pass-3"))
			if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) && !strings.Contains(fmtErr(err), "SASL Authentication failed") {
				t.Fatalf("wrong password: %v", err)
			}
			if strings.Contains(fmtErr(err), "not-the-Pass-3") {
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
