// Package compat holds idemkv's compatibility tests: the unmodified gocql
// driver; the real cqlsh from PyPI (provisioned by compat/cqlshpy) and
// the DataStax Python driver it runs on (the same venv's python running
// compat/testdata/pydriver.py); and the DataStax Node.js driver
// (provisioned by compat/nodedriver from npm, running
// compat/testdata/nodedriver.js) — against an in-process ring of nodes on
// 127.0.0.1–3 over real TCP. The package has no code of its own.
package compat
