// Package layering holds no code: its test enforces the import arrows of
// DESIGN.md ("Layering") on the whole module, from `go list -deps -json`,
// so a forbidden import fails `go test ./...` instead of waiting for a
// reviewer:
//
//   - broker/log and vfs (and packages under vfs) know nothing of the Kafka
//     protocol: they depend neither on franz-go's protocol packages (kmsg,
//     kgo, kadm, kerr, kbin) nor on broker, broker/group or broker/txn;
//   - stream (and everything under it) never depends on broker/...: it talks
//     to any broker over the wire;
//   - no package outside examples/ depends on examples/...: examples are for
//     readers (what `weir dev` runs is internal/demo/surge).
//
// Dependencies are transitive and of non-test code: a test may start a
// broker; the product may not lean on one through another package.
package layering
