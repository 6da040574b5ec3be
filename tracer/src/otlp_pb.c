/* otlp_pb.c - OTLP/JSON to protobuf (http/protobuf), hand-written.
 *
 * The exporters build one form, OTLP/JSON (otlp_json.c); when the protocol
 * is http/protobuf the request body is transcoded here, field by field,
 * against the schema of opentelemetry-proto's ExportTraceServiceRequest
 * (the messages and field numbers below, trace/v1/trace.proto and
 * common/v1/common.proto). So both protocols carry the same spans by
 * construction, and the tests decode the protobuf body with a real OTLP
 * implementation and compare it with the JSON one. Hand-written rather than
 * protobuf-c: seven small messages, no generated code, no protoc at build
 * time.
 *
 * OTLP/JSON's differences from protobuf's JSON mapping are honoured:
 * trace and span ids are hex strings (bytes on the wire), 64-bit integers
 * may be strings, enums are numbers. A key outside the schema is an error
 * (nothing is dropped silently). Nested messages are written in place and
 * their length inserted in front when they end. */
#include "otlp_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_MSG, T_STR, T_HEX, T_FIXED64, T_INT64, T_UINT, T_DOUBLE, T_BOOL, T_FIXED32 } ftype;

struct msgdef;
typedef struct field {
  const char *name;
  int num;
  ftype type;
  const struct msgdef *sub;
} field;
typedef struct msgdef {
  const char *name;
  const field *f;
} msgdef;

#define END {NULL, 0, T_UINT, NULL}
extern const msgdef m_anyvalue;
static const field f_kv[] = {{"key", 1, T_STR, NULL}, {"value", 2, T_MSG, &m_anyvalue}, END};
static const msgdef m_kv = {"KeyValue", f_kv};
static const field f_array[] = {{"values", 1, T_MSG, &m_anyvalue}, END};
static const msgdef m_array = {"ArrayValue", f_array};
static const field f_kvlist[] = {{"values", 1, T_MSG, &m_kv}, END};
static const msgdef m_kvlist = {"KeyValueList", f_kvlist};
static const field f_anyvalue[] = {
    {"stringValue", 1, T_STR, NULL},  {"boolValue", 2, T_BOOL, NULL},
    {"intValue", 3, T_INT64, NULL},   {"doubleValue", 4, T_DOUBLE, NULL},
    {"arrayValue", 5, T_MSG, &m_array}, {"kvlistValue", 6, T_MSG, &m_kvlist}, END};
const msgdef m_anyvalue = {"AnyValue", f_anyvalue};
static const field f_resource[] = {
    {"attributes", 1, T_MSG, &m_kv}, {"droppedAttributesCount", 2, T_UINT, NULL}, END};
static const msgdef m_resource = {"Resource", f_resource};
static const field f_scope[] = {{"name", 1, T_STR, NULL}, {"version", 2, T_STR, NULL},
                                {"attributes", 3, T_MSG, &m_kv},
                                {"droppedAttributesCount", 4, T_UINT, NULL}, END};
static const msgdef m_scope = {"InstrumentationScope", f_scope};
static const field f_event[] = {{"timeUnixNano", 1, T_FIXED64, NULL}, {"name", 2, T_STR, NULL},
                                {"attributes", 3, T_MSG, &m_kv},
                                {"droppedAttributesCount", 4, T_UINT, NULL}, END};
static const msgdef m_event = {"Span.Event", f_event};
static const field f_link[] = {{"traceId", 1, T_HEX, NULL}, {"spanId", 2, T_HEX, NULL},
                               {"traceState", 3, T_STR, NULL}, {"attributes", 4, T_MSG, &m_kv},
                               {"droppedAttributesCount", 5, T_UINT, NULL},
                               {"flags", 6, T_FIXED32, NULL}, END};
static const msgdef m_link = {"Span.Link", f_link};
static const field f_status[] = {{"message", 2, T_STR, NULL}, {"code", 3, T_UINT, NULL}, END};
static const msgdef m_status = {"Status", f_status};
static const field f_span[] = {
    {"traceId", 1, T_HEX, NULL},           {"spanId", 2, T_HEX, NULL},
    {"traceState", 3, T_STR, NULL},        {"parentSpanId", 4, T_HEX, NULL},
    {"flags", 16, T_FIXED32, NULL},        {"name", 5, T_STR, NULL},
    {"kind", 6, T_UINT, NULL},             {"startTimeUnixNano", 7, T_FIXED64, NULL},
    {"endTimeUnixNano", 8, T_FIXED64, NULL}, {"attributes", 9, T_MSG, &m_kv},
    {"droppedAttributesCount", 10, T_UINT, NULL}, {"events", 11, T_MSG, &m_event},
    {"droppedEventsCount", 12, T_UINT, NULL}, {"links", 13, T_MSG, &m_link},
    {"droppedLinksCount", 14, T_UINT, NULL}, {"status", 15, T_MSG, &m_status}, END};
static const msgdef m_span = {"Span", f_span};
static const field f_scopespans[] = {{"scope", 1, T_MSG, &m_scope}, {"spans", 2, T_MSG, &m_span},
                                     {"schemaUrl", 3, T_STR, NULL}, END};
static const msgdef m_scopespans = {"ScopeSpans", f_scopespans};
static const field f_rspans[] = {{"resource", 1, T_MSG, &m_resource},
                                 {"scopeSpans", 2, T_MSG, &m_scopespans},
                                 {"schemaUrl", 3, T_STR, NULL}, END};
static const msgdef m_rspans = {"ResourceSpans", f_rspans};
static const field f_req[] = {{"resourceSpans", 1, T_MSG, &m_rspans}, END};
static const msgdef m_req = {"ExportTraceServiceRequest", f_req};

/* --- the output ---------------------------------------------------------- */

typedef struct pb {
  const char *start, *s, *end; /* JSON being read */
  unsigned char *b;
  size_t len, cap;
  int rc;
  char *err;
  size_t errlen;
} pb;

static int fail(pb *p, const char *what) {
  if (p->rc == DIST_OK) {
    p->rc = DIST_E_INVAL;
    snprintf(p->err, p->errlen, "OTLP/JSON to protobuf: %s at byte %zu", what,
             (size_t)(p->s - p->start));
  }
  return p->rc;
}

static bool room(pb *p, size_t n) {
  if (p->len + n <= p->cap)
    return true;
  size_t cap = p->cap ? p->cap * 2 : 4096;
  while (cap < p->len + n)
    cap *= 2;
  unsigned char *b = realloc(p->b, cap);
  if (!b) {
    p->rc = DIST_E_NOMEM;
    snprintf(p->err, p->errlen, "out of memory transcoding an OTLP request");
    return false;
  }
  p->b = b;
  p->cap = cap;
  return true;
}

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80)
    v >>= 7, n++;
  return n;
}

static void varint_at(unsigned char *o, uint64_t v) {
  while (v >= 0x80) {
    *o++ = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  *o = (unsigned char)v;
}

static void put_varint(pb *p, uint64_t v) {
  if (room(p, 10)) {
    varint_at(p->b + p->len, v);
    p->len += varint_len(v);
  }
}

static void put_raw(pb *p, const void *d, size_t n) {
  if (room(p, n)) {
    memcpy(p->b + p->len, d, n);
    p->len += n;
  }
}

static void put_tag(pb *p, int num, int wire) { put_varint(p, ((uint64_t)num << 3) | (unsigned)wire); }

static void put_le(pb *p, uint64_t v, int bytes) {
  unsigned char o[8];
  for (int i = 0; i < bytes; i++)
    o[i] = (unsigned char)(v >> (8 * i));
  put_raw(p, o, (size_t)bytes);
}

/* A nested message written from mark on: its length goes in front. */
static void close_len(pb *p, size_t mark) {
  size_t n = p->len - mark, k = varint_len(n);
  if (!room(p, k))
    return;
  memmove(p->b + mark + k, p->b + mark, n);
  varint_at(p->b + mark, n);
  p->len += k;
}

/* --- the JSON ------------------------------------------------------------ */

static void ws(pb *p) {
  while (p->s < p->end && (*p->s == ' ' || *p->s == '\n' || *p->s == '\t' || *p->s == '\r'))
    p->s++;
}

static bool eat(pb *p, char c) {
  ws(p);
  if (p->s < p->end && *p->s == c) {
    p->s++;
    return true;
  }
  return false;
}

static void utf8(char **o, unsigned cp) {
  if (cp < 0x80) {
    *(*o)++ = (char)cp;
  } else if (cp < 0x800) {
    *(*o)++ = (char)(0xc0 | cp >> 6);
    *(*o)++ = (char)(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *(*o)++ = (char)(0xe0 | cp >> 12);
    *(*o)++ = (char)(0x80 | ((cp >> 6) & 0x3f));
    *(*o)++ = (char)(0x80 | (cp & 0x3f));
  } else {
    *(*o)++ = (char)(0xf0 | cp >> 18);
    *(*o)++ = (char)(0x80 | ((cp >> 12) & 0x3f));
    *(*o)++ = (char)(0x80 | ((cp >> 6) & 0x3f));
    *(*o)++ = (char)(0x80 | (cp & 0x3f));
  }
}

static bool hex4(const char *s, unsigned *v) {
  char h[5] = {0};
  memcpy(h, s, 4);
  char *e;
  *v = (unsigned)strtoul(h, &e, 16);
  return e == h + 4;
}

/* A JSON string, unescaped into malloc'd *out (its length in *n). */
static int string(pb *p, char **out, size_t *n) {
  *out = NULL;
  if (!eat(p, '"'))
    return fail(p, "a string expected");
  const char *q = p->s;
  while (q < p->end && *q != '"')
    q += *q == '\\' ? 2 : 1;
  if (q >= p->end)
    return fail(p, "an unterminated string");
  char *o = malloc((size_t)(q - p->s) + 1), *w = o;
  if (!o)
    return fail(p, "out of memory");
  while (p->s < q) {
    char c = *p->s++;
    if (c != '\\') {
      *w++ = c;
      continue;
    }
    c = *p->s++;
    const char *simple = strchr("\"\\/bfnrt", c);
    unsigned cp, lo;
    if (simple && c) {
      *w++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
    } else if (c == 'u' && q - p->s >= 4 && hex4(p->s, &cp)) {
      p->s += 4;
      if (cp >= 0xd800 && cp < 0xdc00 && q - p->s >= 6 && p->s[0] == '\\' && p->s[1] == 'u' &&
          hex4(p->s + 2, &lo) && lo >= 0xdc00 && lo < 0xe000) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        p->s += 6;
      }
      utf8(&w, cp);
    } else {
      free(o);
      return fail(p, "a bad escape in a string");
    }
  }
  p->s = q + 1;
  *w = '\0';
  *out = o;
  *n = (size_t)(w - o);
  return DIST_OK;
}

/* A number, or a decimal string (OTLP/JSON's 64-bit integers). */
static int number_text(pb *p, char *buf, size_t len) {
  ws(p);
  if (p->s < p->end && *p->s == '"') {
    char *s;
    size_t n;
    if (string(p, &s, &n) != DIST_OK)
      return p->rc;
    snprintf(buf, len, "%s", s);
    free(s);
    return DIST_OK;
  }
  size_t n = 0;
  while (p->s < p->end && strchr("+-0123456789.eE", *p->s) && n + 1 < len)
    buf[n++] = *p->s++;
  buf[n] = '\0';
  return n ? DIST_OK : fail(p, "a number expected");
}

static int integer(pb *p, bool sign, uint64_t *v) {
  char t[64], *e;
  if (number_text(p, t, sizeof t) != DIST_OK)
    return p->rc;
  errno = 0;
  *v = sign ? (uint64_t)strtoll(t, &e, 10) : strtoull(t, &e, 10);
  if (errno || e == t || *e || (!sign && t[0] == '-'))
    return fail(p, "an integer expected");
  return DIST_OK;
}

static int message(pb *p, const msgdef *m);

static int hexbytes(pb *p, int num) {
  char *s;
  size_t n;
  if (string(p, &s, &n) != DIST_OK)
    return p->rc;
  unsigned char raw[64];
  bool ok = n % 2 == 0 && n / 2 <= sizeof raw;
  for (size_t i = 0; ok && i < n / 2; i++) {
    unsigned v;
    ok = sscanf(s + 2 * i, "%2x", &v) == 1;
    raw[i] = (unsigned char)v;
  }
  free(s);
  if (!ok)
    return fail(p, "an id that is not hex");
  put_tag(p, num, 2);
  put_varint(p, n / 2);
  put_raw(p, raw, n / 2);
  return p->rc;
}

static int single(pb *p, const field *f) {
  uint64_t v = 0;
  char *s;
  size_t n;
  switch (f->type) {
  case T_MSG: {
    put_tag(p, f->num, 2);
    size_t mark = p->len;
    if (message(p, f->sub) == DIST_OK)
      close_len(p, mark);
    return p->rc;
  }
  case T_STR:
    if (string(p, &s, &n) != DIST_OK)
      return p->rc;
    put_tag(p, f->num, 2);
    put_varint(p, n);
    put_raw(p, s, n);
    free(s);
    return p->rc;
  case T_HEX: return hexbytes(p, f->num);
  case T_FIXED64:
  case T_FIXED32:
    if (integer(p, false, &v) != DIST_OK)
      return p->rc;
    put_tag(p, f->num, f->type == T_FIXED64 ? 1 : 5);
    put_le(p, v, f->type == T_FIXED64 ? 8 : 4);
    return p->rc;
  case T_INT64:
  case T_UINT:
    if (integer(p, f->type == T_INT64, &v) != DIST_OK)
      return p->rc;
    put_tag(p, f->num, 0);
    put_varint(p, v);
    return p->rc;
  case T_DOUBLE: {
    char t[64], *e;
    if (number_text(p, t, sizeof t) != DIST_OK)
      return p->rc;
    double d = strtod(t, &e);
    if (*e)
      return fail(p, "a number expected");
    memcpy(&v, &d, 8);
    put_tag(p, f->num, 1);
    put_le(p, v, 8);
    return p->rc;
  }
  case T_BOOL:
    ws(p);
    if (p->end - p->s >= 4 && !strncmp(p->s, "true", 4))
      v = 1, p->s += 4;
    else if (p->end - p->s >= 5 && !strncmp(p->s, "false", 5))
      p->s += 5;
    else
      return fail(p, "true or false expected");
    put_tag(p, f->num, 0);
    put_varint(p, v);
    return p->rc;
  }
  return fail(p, "a field of no type");
}

/* A field's value: an array repeats it (every repeated field here is a
 * message, written one after the other). */
static int value(pb *p, const field *f) {
  ws(p);
  if (p->s < p->end && *p->s == '[') {
    p->s++;
    if (eat(p, ']'))
      return DIST_OK;
    do {
      if (single(p, f) != DIST_OK)
        return p->rc;
    } while (eat(p, ','));
    return eat(p, ']') ? DIST_OK : fail(p, "',' or ']' expected");
  }
  return single(p, f);
}

static int message(pb *p, const msgdef *m) {
  if (!eat(p, '{'))
    return fail(p, "'{' expected");
  if (eat(p, '}'))
    return DIST_OK;
  do {
    char *key;
    size_t n;
    if (string(p, &key, &n) != DIST_OK)
      return p->rc;
    const field *f = m->f;
    while (f->name && strcmp(f->name, key))
      f++;
    if (!f->name) {
      char what[200];
      snprintf(what, sizeof what, "'%.60s' is not a field of %s", key, m->name);
      free(key);
      return fail(p, what);
    }
    free(key);
    if (!eat(p, ':'))
      return fail(p, "':' expected");
    if (value(p, f) != DIST_OK)
      return p->rc;
  } while (eat(p, ','));
  return eat(p, '}') ? DIST_OK : fail(p, "',' or '}' expected");
}

int tr_otlp_json_to_pb(const char *json, size_t len, unsigned char **out, size_t *out_len,
                       char *err, size_t errlen) {
  char *copy = malloc(len + 1); /* NUL-terminated, for the parser's strchr */
  if (!copy) {
    snprintf(err, errlen, "out of memory transcoding an OTLP request");
    return DIST_E_NOMEM;
  }
  memcpy(copy, json, len);
  copy[len] = '\0';
  pb p = {.start = copy, .s = copy, .end = copy + len, .rc = DIST_OK, .err = err, .errlen = errlen};
  if (message(&p, &m_req) == DIST_OK) {
    ws(&p);
    if (p.s != p.end)
      fail(&p, "text after the request");
  }
  free(copy);
  if (p.rc != DIST_OK) {
    free(p.b);
    return p.rc;
  }
  *out = p.b;
  *out_len = p.len;
  return DIST_OK;
}
