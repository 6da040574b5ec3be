// otlp_receiver.js - a test OTLP/HTTP collector for the tracer's exporter.
//
//   node otlp_receiver.js MODE OUTDIR      (NODE_PATH names the node_modules)
//
// Listens on 127.0.0.1 (a free port, printed as the first line of stdout:
// the test's readiness signal) and takes POST /v1/traces. MODE ok: each
// body is decoded strictly with the OTLP protobuf types of
// @opentelemetry/otlp-transformer 0.57 (ExportTraceServiceRequest): the
// hex ids of OTLP/JSON are turned into bytes, the message is verified,
// built, encoded to protobuf, decoded again and turned back into JSON,
// which must equal what was sent (so nothing was silently dropped). A body
// that passes is written to OUTDIR/req-N.json and answered 200; one that
// fails is answered 400 with the reason (and written to OUTDIR/bad-N.txt).
// MODE fail500: every request is answered 500.
'use strict';
const fs = require('fs');
const http = require('http');
const path = require('path');
const root = require('@opentelemetry/otlp-transformer/build/src/generated/root');

const Req = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const [mode, outdir] = process.argv.slice(2);
const ID = { traceId: 32, spanId: 16, parentSpanId: 16 };

// Walks every span and span link, mapping its id fields with
// fn(name, value, digits) (OTLP/JSON has hex ids in links too).
function mapIds(req, fn) {
  const map = (o) => {
    for (const k of Object.keys(ID))
      if (k in o) o[k] = fn(k, o[k], ID[k]);
  };
  for (const rs of req.resourceSpans || [])
    for (const ss of rs.scopeSpans || [])
      for (const sp of ss.spans || []) {
        map(sp);
        for (const l of sp.links || []) map(l);
      }
}

// JSON with object keys sorted: field order carries no meaning.
function canon(v) {
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

function strict(body) {
  const sent = JSON.parse(body);
  const obj = JSON.parse(body);
  mapIds(obj, (k, v, digits) => {
    if (typeof v !== 'string' || !new RegExp(`^[0-9a-f]{${digits}}$`).test(v))
      throw new Error(`${k} ${JSON.stringify(v)} is not ${digits} hex digits`);
    return Buffer.from(v, 'hex').toString('base64');
  });
  // verify() wants Long values where OTLP/JSON has decimal strings, so it
  // checks the message fromObject built.
  const msg = Req.fromObject(obj);
  const why = Req.verify(msg);
  if (why) throw new Error(`verify: ${why}`);
  const wire = Req.encode(msg).finish();
  const back = Req.toObject(Req.decode(wire), { longs: String, bytes: String, enums: Number });
  mapIds(back, (k, v) => Buffer.from(v, 'base64').toString('hex'));
  const a = canon(sent), b = canon(back);
  if (a !== b) {
    let i = 0;
    while (i < a.length && a[i] === b[i]) i++;
    throw new Error(`re-encoding differs at ${i}: sent ...${a.slice(i, i + 80)} ` +
                    `got ...${b.slice(i, i + 80)}`);
  }
}

let n = 0;
const server = http.createServer((rq, rs) => {
  const chunks = [];
  rq.on('data', (c) => chunks.push(c));
  rq.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const k = n++;
    if (mode === 'fail500') {
      rs.writeHead(500, { 'Content-Type': 'text/plain' });
      return rs.end('collector broken on purpose');
    }
    if (rq.method !== 'POST' || rq.url !== '/v1/traces' ||
        !/^application\/json/.test(rq.headers['content-type'] || '')) {
      rs.writeHead(404);
      return rs.end(`unexpected ${rq.method} ${rq.url}`);
    }
    try {
      strict(body);
    } catch (e) {
      fs.writeFileSync(path.join(outdir, `bad-${k}.txt`), `${e.message}\n${body}`);
      rs.writeHead(400, { 'Content-Type': 'text/plain' });
      return rs.end(e.message);
    }
    fs.writeFileSync(path.join(outdir, `req-${k}.json`), body);
    rs.writeHead(200, { 'Content-Type': 'application/json' });
    rs.end('{}');
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
