// Package compat holds weir's compatibility tests: real Kafka clients
// (franz-go, sarama, segmentio/kafka-go, kcat/librdkafka,
// confluent-kafka-python, kafka-python, kafkajs) run against an in-process
// weir broker started with weirtest.
//
// Every test follows the same script: the client creates a topic with
// several partitions (kcat, which has no admin API, gets it from the Go
// driver), produces keyed records with acks=all, and reads every one back.
// The Go driver checks, independently of the client, that
//
//   - the log holds exactly the records produced (end offsets sum to the
//     count: nothing lost, nothing duplicated),
//   - every record came back with its key and value, once,
//   - each keyed record sits in the partition the Java client's partitioner
//     (murmur2) would choose, for clients that use or are configured with
//     it, and in one partition per key for the others,
//   - the partition and offset the producer was told match where the
//     consumer found the record,
//   - read again as a consumer-group member (every client; kafkajs only
//     has group consumers), every record comes back once and the group's
//     committed offsets equal the partitions' end offsets.
//
// Group rebalances are checked separately (group_test.go for
// confluent-kafka-python cooperative-sticky, sarama_group_test.go for
// sarama's sticky strategy, kafkajs_group_test.go for kafkajs,
// franzgo_group_test.go for franz-go eager and cooperative): members of
// one group join and leave under steady produce, committing synchronously
// after every record, and the driver checks from the clients'
// assign/revoke callbacks that the partitions are split between the live
// members (cooperative-sticky: only the partitions that must move are
// revoked; sticky: members keep what they had), that every acknowledged
// record is consumed exactly once, and that the group ends committed at
// the end offsets.
//
// The kcat and confluent-kafka-python tests restart the broker (clean
// shutdown, same data directory and address) between producing and
// consuming.
//
// Schema registry clients (schemaregistry_*_test.go: franz-go's pkg/sr
// Serde, confluent-kafka-python's SchemaRegistryClient with its JSON Schema
// and Protobuf serializers, @kafkajs/confluent-schema-registry for Avro,
// JSON Schema and Protobuf) run against weir's registry (package registry)
// on the in-process broker: each registers a schema, evolves it compatibly,
// is refused an incompatible version (409), and produces and consumes
// through weir with its serializer; the driver checks the registry's
// versions and ids and that every logged record carries magic byte 0 and
// the id of the version it was produced with.
//
// Security (security_test.go, franzgo_sasl_test.go): kcat over SASL_SSL
// with SCRAM-SHA-512 and over SSL with a client certificate,
// confluent-kafka-python over SASL_SSL/SCRAM-SHA-512 and mTLS, kafka-python
// over SASL_SSL/SCRAM-SHA-512 (its SaslHandshake v0 raw-token flow), sarama
// (SCRAM-SHA-512, PLAIN) and kafkajs (PLAIN, SCRAM-SHA-256/512, with a
// consumer group) over SASL_SSL, each
// producing and reading back through the secured listener while the driver
// checks the log through a PLAINTEXT one; wrong passwords are refused. The
// certificates are made by the test (internal/testcerts). franz-go's own
// SASL integration tests (TestSCRAMAuth, TestSCRAMAuthBadCredentials,
// TestOAuthAuth in package kgo) are run from the module cache with
// KGO_TEST_SCRAM_SEEDS and KGO_TEST_OAUTH_SEEDS at a weir SASL listener.
//
// The non-Go clients are driven by the scripts in compat/py and compat/js,
// which read the records to produce as JSON lines on stdin and print what
// they delivered/consumed as JSON lines on stdout. A missing tool is a test
// failure: .ci/run installs them.
//
// franz-go's own integration tests (package kgo, in the module cache at
// $(go env GOMODCACHE)/github.com/twmb/franz-go@<version>/pkg/kgo) run
// against any broker named by KGO_SEEDS; KGO_TEST_RF=1 makes them create
// single-replica topics. To run some against weir, copy the module out of
// the (read-only) cache and point it at a `weir serve`:
//
//	weir serve --data-dir /tmp/kgo-weir --kafka-addr 127.0.0.1:19092 --http-addr off --group-initial-rebalance-delay 0 &
//	cp -r $(go env GOMODCACHE)/github.com/twmb/franz-go@v1.22.3 /tmp/franz-go && chmod -R u+w /tmp/franz-go
//	cd /tmp/franz-go/pkg/kgo && KGO_SEEDS=127.0.0.1:19092 KGO_TEST_RF=1 KGO_LOG_LEVEL=none \
//		go test -count=1 -run '^(TestConsumeRegex|Test848RegexBrokerResolves)$' .
//
// franz-go's share group tests (TestShareGroup*, TestConsumeRegexShareSkipsInternal)
// run that way in CI: compat/kgosuite.
//
// Those two pass (they need __consumer_offsets in all-topics Metadata with
// IsInternal, and KIP-848 regexes matched on whole names, internal topics
// included, as Kafka does).
package compat
