#!/usr/bin/env bash
# gocql-suite.sh runs gocql v1.7.0's own integration suite (its `cassandra`
# and `integration` build tags) against a 3-node idemkv ring and writes a
# summary: per tag, the passed/failed/skipped top-level tests and the names of
# the failing ones. See docs/gocql-suite.md.
#
#   scripts/gocql-suite.sh [--ring-dir D] [--keep] [--out DIR] [--tags "cassandra integration"]
#                          [--timeout 10m] [-- go-test-args...]
#
# Without --ring-dir it builds ./cmd/idemkv, starts `idemkv ring up -n 3` in a
# temporary directory and stops it on exit (--keep leaves it up and prints its
# directory). With --ring-dir it uses the ring already running there (nodes on
# 127.0.0.1..3:9042) and never stops it. Arguments after `--` (or any argument
# the script does not know, e.g. -run TestX) go to every `go test` run.
# OUT (default ./gocql-suite-out, or --out) receives <tag>.log, the full
# `go test -v` output, and summary.txt. The script exits 0 when the suite ran,
# whatever the tests' results; it exits non-zero only when it could not run it.
set -euo pipefail

GOCQL_VERSION=v1.7.0
OUT=${OUT:-./gocql-suite-out}
RING_DIR=""
KEEP=0
TAGS="cassandra integration"
TIMEOUT=10m
EXTRA=()

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
	case $1 in
	--ring-dir) RING_DIR=$2; shift 2 ;;
	--ring-dir=*) RING_DIR=${1#*=}; shift ;;
	--keep) KEEP=1; shift ;;
	--out) OUT=$2; shift 2 ;;
	--out=*) OUT=${1#*=}; shift ;;
	--tags) TAGS=$2; shift 2 ;;
	--tags=*) TAGS=${1#*=}; shift ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--timeout=*) TIMEOUT=${1#*=}; shift ;;
	-h|--help) usage; exit 0 ;;
	--) shift; EXTRA+=("$@"); break ;;
	*) EXTRA+=("$1"); shift ;;
	esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gocql-suite.XXXXXX")
STARTED_RING=""

cleanup() {
	local rc=$?
	if [[ -n $STARTED_RING ]]; then
		if [[ $KEEP == 1 ]]; then
			echo "gocql-suite: ring left running in $STARTED_RING (stop: $TMP/idemkv ring stop --dir $STARTED_RING)" >&2
		else
			"$TMP/idemkv" ring stop --dir "$STARTED_RING" >/dev/null 2>&1 || true
		fi
	fi
	if [[ $KEEP == 1 && -n $STARTED_RING ]]; then
		# the binary and the ring's data stay with the ring; the module copy goes
		rm -rf "$TMP/gocql"
	else
		rm -rf "$TMP"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. The module source, from the Go module cache (read-only there).
echo "gocql-suite: module github.com/gocql/gocql@$GOCQL_VERSION" >&2
MODDIR=$(cd "$ROOT" && go mod download -json "github.com/gocql/gocql@$GOCQL_VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[[ -n $MODDIR && -d $MODDIR ]] || { echo "gocql-suite: no module directory for gocql@$GOCQL_VERSION" >&2; exit 2; }
cp -r "$MODDIR" "$TMP/gocql"
chmod -R u+w "$TMP/gocql"
export GOFLAGS=-mod=mod

# 2. The ring.
if [[ -z $RING_DIR ]]; then
	echo "gocql-suite: building idemkv" >&2
	(cd "$ROOT" && go build -o "$TMP/idemkv" ./cmd/idemkv)
	STARTED_RING=$TMP/ring
	echo "gocql-suite: starting a 3-node ring in $STARTED_RING" >&2
	# The test hooks gocql's CI cluster starts Cassandra with
	# (-Dcassandra.custom_query_handler_class=...CustomPayloadMirroringQueryHandler,
	# -Dcassandra.test.fail_writes_ks=test), for TestCustomPayloadMessages,
	# TestCustomPayloadValues and TestWriteFailure; see docs/config.md.
	"$TMP/idemkv" ring up -n 3 --dir "$STARTED_RING" \
		--custom-query-handler-class=org.apache.cassandra.cql3.CustomPayloadMirroringQueryHandler \
		--test-fail-writes-keyspace=test >"$OUT/ring-up.txt" 2>&1 ||
		{ cat "$OUT/ring-up.txt" >&2; exit 2; }
fi
HOSTS=127.0.0.1,127.0.0.2,127.0.0.3

# The flags of gocql's own CI (.github/workflows/main.yml) minus -runssl
# (idemkv has no client TLS) and -race; -gocql.cversion is the
# release_version idemkv's nodes report, which decides the tests' skips.
FLAGS=(-cluster="$HOSTS" -proto=4 -rf=3 -clusterSize=3 -autowait=2000ms
	-compressor=snappy -gocql.timeout=10s -gocql.cversion=3.11.17)

# tagged_tests TAG prints the Test functions of the files built only with TAG.
tagged_tests() {
	local f
	for f in "$TMP"/gocql/*_test.go; do
		if grep -qx "//go:build all || $1" "$f"; then
			sed -n 's/^func \(Test[A-Za-z0-9_]*\)(.*/\1/p' "$f"
		fi
	done | sort -u
}

# summarize TAG LOG appends TAG's summary to $OUT/summary.txt. A top-level test
# is one whose "=== RUN" or "--- RESULT" line has no '/' in its name.
summarize() {
	local tag=$1 log=$2 rc=$3
	tagged_tests "$tag" >"$TMP/tagged"
	awk -v tag="$tag" -v rc="$rc" -v tagged="$TMP/tagged" -v filtered="$FILTERED" '
	BEGIN { while ((getline t < tagged) > 0) istagged[t] = 1 }
	/^=== RUN   / { n = $3; if (n !~ /\//) { if (!(n in seen)) order[++no] = n; seen[n] = 1 } }
	/^--- (PASS|FAIL|SKIP): / { n = $3; if (n !~ /\//) res[n] = $2 }
	/^panic: test timed out/ { timedout = 1 }
	/^panic: / && !/test timed out/ { panicked = 1 }
	END {
		for (g = 0; g < 2; g++) {
			p = f = s = u = 0; fl = ""; ul = ""
			for (i = 1; i <= no; i++) {
				n = order[i]
				if ((g == 0) != (n in istagged)) continue
				r = (n in res) ? res[n] : "NONE"
				if (r == "PASS:") p++
				else if (r == "SKIP:") s++
				else if (r == "FAIL:") { f++; fl = fl "  FAIL " n "\n" }
				else { u++; ul = ul "  NO RESULT " n " (still running when the run ended: hang, timeout or panic)\n" }
			}
			nr = 0; nl = ""
			if (g == 0) for (t in istagged) if (!(t in seen)) { nr++; nl = nl "  NOT RUN " t "\n" }
			if (filtered) nl = ""
			if (g == 0) {
				total = 0; for (t in istagged) total++
				printf "%s: %d tests in the %s-tagged files: %d passed, %d failed, %d skipped", tag, total, tag, p, f, s
			} else {
				printf "%s: untagged tests compiled in the same run: %d passed, %d failed, %d skipped", tag, p, f, s
			}
			if (u) printf ", %d without result", u
			if (nr) printf ", %d not run%s", nr, filtered ? " (-run/-skip given)" : ""
			printf "\n%s%s%s", fl, ul, nl
		}
		if (timedout) printf "%s: the run hit go test -timeout (see the goroutine dump in %s.log)\n", tag, tag
		else if (panicked) printf "%s: the run panicked (see %s.log)\n", tag, tag
		printf "%s: go test exit status %d\n\n", tag, rc
	}' "$log" | tee -a "$OUT/summary.txt"
}

# With -run or -skip the tests left out are counted, not listed.
FILTERED=0
for a in ${EXTRA[@]+"${EXTRA[@]}"}; do
	case $a in -run|-run=*|--run|--run=*|-skip|-skip=*|--skip|--skip=*|-test.run*|-test.skip*) FILTERED=1 ;; esac
done

: >"$OUT/summary.txt"
{
	echo "gocql $GOCQL_VERSION suite against idemkv ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)), $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "flags: ${FLAGS[*]} ${EXTRA[*]:-}"
	echo
} | tee -a "$OUT/summary.txt"

# 3. The suite, once per tag.
for tag in $TAGS; do
	log=$OUT/$tag.log
	echo "gocql-suite: go test -tags $tag (timeout $TIMEOUT), log in $log" >&2
	start=$(date +%s)
	rc=0
	# go test -timeout panics with the running tests' names; the outer
	# timeout is for a go test that cannot even do that.
	(cd "$TMP/gocql" && timeout --kill-after=30s 30m \
		go test -tags "$tag" -v -count=1 -timeout "$TIMEOUT" "${FLAGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"} . \
		>"$log" 2>&1) || rc=$?
	echo "gocql-suite: $tag took $(( $(date +%s) - start ))s" >&2
	summarize "$tag" "$log" "$rc"
done
echo "gocql-suite: summary in $OUT/summary.txt" >&2
