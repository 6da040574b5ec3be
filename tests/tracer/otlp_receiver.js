// otlp_receiver.js - a test OTLP/HTTP collector for the tracer's exporter.
//
//   node otlp_receiver.js MODE OUTDIR [KEY CERT]   (NODE_PATH names the node_modules)
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
// MODE fail500: every request is answered 500. MODE hang: no request is
// ever answered (a collector that accepts and stalls). MODE https: as ok,
// over TLS with the PEM files KEY and CERT.
//
// Every request's content type, content encoding and headers go to
// OUTDIR/meta-N.json. A gzip body (Content-Encoding: gzip) is inflated with
// node's zlib; an application/x-protobuf body is decoded with the same
// OTLP types (ExportTraceServiceRequest.decode, strict: trailing garbage or
// a wrong wire type throws) and turned into OTLP/JSON (hex ids, 64-bit
// integers as strings, enums as numbers), which is what req-N.json then
// holds, so a test compares it with the JSON form field by field.
'use strict';
const fs = require('fs');
const http = require('http');
const https = require('https');
const path = require('path');
const zlib = require('zlib');
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

// A protobuf request as OTLP/JSON text.
function fromProtobuf(wire) {
  const msg = Req.decode(wire);
  const obj = Req.toObject(msg, { longs: String, bytes: String, enums: Number });
  mapIds(obj, (k, v) => Buffer.from(v, 'base64').toString('hex'));
  return JSON.stringify(obj);
}

let n = 0;
const handler = (rq, rs) => {
  const chunks = [];
  rq.on('data', (c) => chunks.push(c));
  rq.on('end', () => {
    let raw = Buffer.concat(chunks);
    const k = n++;
    const type = rq.headers['content-type'] || '';
    const enc = rq.headers['content-encoding'] || '';
    fs.writeFileSync(path.join(outdir, `meta-${k}.json`),
                     JSON.stringify({ type, encoding: enc, headers: rq.headers }));
    if (mode === 'hang') return; // never answered
    if (mode === 'fail500') {
      rs.writeHead(500, { 'Content-Type': 'text/plain' });
      return rs.end('collector broken on purpose');
    }
    const proto = /^application\/x-protobuf/.test(type);
    if (rq.method !== 'POST' || rq.url !== '/v1/traces' ||
        !(proto || /^application\/json/.test(type)) || (enc && enc !== 'gzip')) {
      rs.writeHead(404);
      return rs.end(`unexpected ${rq.method} ${rq.url} ${type} ${enc}`);
    }
    let body;
    try {
      if (enc === 'gzip') raw = zlib.gunzipSync(raw);
      body = proto ? fromProtobuf(raw) : raw.toString('utf8');
      strict(body);
    } catch (e) {
      fs.writeFileSync(path.join(outdir, `bad-${k}.txt`), `${e.message}\n${body || ''}`);
      rs.writeHead(400, { 'Content-Type': 'text/plain' });
      return rs.end(e.message);
    }
    fs.writeFileSync(path.join(outdir, `req-${k}.json`), body);
    rs.writeHead(200, { 'Content-Type': 'application/json' });
    rs.end('{}');
  });
};
const server = mode === 'https'
  ? https.createServer({ key: fs.readFileSync(process.argv[4]),
                         cert: fs.readFileSync(process.argv[5]) }, handler)
  : http.createServer(handler);
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
process.on('SIGTERM', () => (mode === 'hang' ? process.exit(0) : server.close(() => process.exit(0))));
