// Reads idemkv through the DataStax Node.js driver (npm cassandra-driver)
// for compat/nodedriver_test.go: the same request on stdin and answer on
// stdout as compat/testdata/pydriver.py (see there), with the driver's
// version in "driver". Rows are read with the result's async iterator,
// which fetches the next pages itself; "pages" are the pages of a walk by
// pageState. Run with NODE_PATH naming the node_modules that holds the
// driver.
'use strict';

const cassandra = require('cassandra-driver');
const { types } = cassandra;

// enc turns a value into JSON text, 64-bit integers exactly.
function enc(v) {
  if (v === null || v === undefined) return 'null';
  if (v instanceof types.Long) return v.toString();
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number' || typeof v === 'boolean') return JSON.stringify(v);
  if (typeof v === 'string') return JSON.stringify(v);
  if (Buffer.isBuffer(v)) return JSON.stringify(v.toString('hex'));
  if (v instanceof types.Tuple) return '[' + v.values().map(enc).join(',') + ']';
  if (v instanceof Map) return '[' + Array.from(v.entries()).map(([k, x]) => '[' + enc(k) + ',' + enc(x) + ']').join(',') + ']';
  if (v instanceof Set || Array.isArray(v)) return '[' + Array.from(v).map(enc).join(',') + ']';
  return JSON.stringify(v.toString());
}

function rowText(row) {
  return '[' + row.keys().map((k) => enc(row.get(k))).join(',') + ']';
}

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function main() {
  const req = await readStdin();
  const client = new cassandra.Client({
    contactPoints: [req.host],
    localDataCenter: 'datacenter1',
    protocolOptions: { port: req.port, maxVersion: 4 },
    encoding: { map: Map, set: Set },
    socketOptions: { connectTimeout: 30000, readTimeout: 60000 },
  });
  await client.connect();
  const results = [];
  try {
    for (const q of req.queries) {
      const opts = { prepare: false, fetchSize: q.fetch_size || 5000, consistency: types.consistencies.quorum };
      const rows = [];
      for await (const row of await client.execute(q.q, [], opts)) rows.push(rowText(row));
      const pages = [];
      const manual = [];
      const states = [];
      let state;
      for (let i = 0; ; i++) {
        const rs = await client.execute(q.q, [], Object.assign({}, opts, { pageState: state }));
        pages.push(rs.rows.length);
        if (i < (q.manual_pages || 0)) {
          manual.push('[' + rs.rows.map(rowText).join(',') + ']');
          states.push(state);
        }
        state = rs.pageState;
        if (!state) break;
        if (i > 100000) throw new Error('paging by pageState does not end');
      }
      let replayed = 'null';
      if (states.length >= 2) {
        const rs = await client.execute(q.q, [], Object.assign({}, opts, { pageState: states[1] }));
        replayed = '[' + rs.rows.map(rowText).join(',') + ']';
      }
      results.push(JSON.stringify(q.name) + ':{"rows":[' + rows.join(',') + '],"pages":' + JSON.stringify(pages) +
        ',"manual":[' + manual.join(',') + '],"replayed":' + replayed + '}');
    }
  } finally {
    await client.shutdown();
  }
  process.stdout.write('{"driver":' + JSON.stringify(cassandra.version) + ',"results":{' + results.join(',') + '}}');
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + '\n');
  process.exit(1);
});
