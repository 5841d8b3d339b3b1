// Package compat holds idemkv's compatibility tests: the unmodified gocql
// driver, and the real cqlsh from PyPI (provisioned by compat/cqlshpy),
// against an in-process ring of nodes on 127.0.0.1–3 over real TCP. The
// package has no code of its own.
package compat
