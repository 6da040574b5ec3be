/* otlp_conf.c - where and how OTLP requests go, from OpenTelemetry's
 * standard variables (the exporter part of the OTel SDK configuration
 * spec) and ours, for the live exporter and `distview export`.
 *
 * Each setting reads the traces-specific variable first, then the generic
 * one (OTEL_EXPORTER_OTLP_TRACES_X, then OTEL_EXPORTER_OTLP_X); our DIST_
 * names come before both where they exist (DIST_OTLP_ENDPOINT,
 * DIST_OTLP_TIMEOUT_MS, DIST_OTLP_SERVICE), so a job set up for libdist
 * keeps working. A TRACES_ENDPOINT is the whole URL; the generic endpoint
 * and ours are a base that gets /v1/traces. A value that cannot be used
 * is an error naming the variable, never a silent default. */
#include "otlp_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int bad(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return DIST_E_INVAL;
}

/* The traces variable, else the generic one; *name says which was read. */
static const char *otel(const char *what, const char **name) {
  static _Thread_local char n1[96], n2[96];
  snprintf(n1, sizeof n1, "OTEL_EXPORTER_OTLP_TRACES_%s", what);
  snprintf(n2, sizeof n2, "OTEL_EXPORTER_OTLP_%s", what);
  const char *v = getenv(n1);
  if (v && *v) {
    *name = n1;
    return v;
  }
  v = getenv(n2);
  *name = n2;
  return v && *v ? v : NULL;
}

bool tr_otlp_sdk_disabled(void) {
  const char *v = getenv("OTEL_SDK_DISABLED");
  return v && !strcasecmp(v, "true");
}

/* %XX escapes of W3C baggage-style lists (OTEL_*_HEADERS, _RESOURCE_
 * ATTRIBUTES), decoded in place; false on a broken escape. */
static bool unescape(char *s) {
  char *o = s;
  for (const char *p = s; *p; p++) {
    if (*p != '%') {
      *o++ = *p;
      continue;
    }
    if (!isxdigit((unsigned char)p[1]) || !isxdigit((unsigned char)p[2]))
      return false;
    char hx[3] = {p[1], p[2], 0};
    *o++ = (char)strtol(hx, NULL, 16);
    p += 2;
  }
  *o = '\0';
  return true;
}

static void trim(char **s) {
  while (isspace((unsigned char)**s))
    (*s)++;
  size_t n = strlen(*s);
  while (n && isspace((unsigned char)(*s)[n - 1]))
    (*s)[--n] = '\0';
}

int tr_otlp_list_parse(const char *name, const char *text, tr_otlp_kv *out, int cap, int *n,
                       char *err, size_t len) {
  char buf[4096];
  *n = 0;
  if (strlen(text) >= sizeof buf)
    return bad(err, len, "%s is longer than %zu characters", name, sizeof buf - 1);
  snprintf(buf, sizeof buf, "%s", text);
  for (char *save = NULL, *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(e, '=');
    if (!eq)
      return bad(err, len, "%s='%s': '%s' is not key=value (a comma-separated list of "
                 "key=value, values %%-escaped)", name, text, e);
    *eq = '\0';
    char *k = e, *v = eq + 1;
    trim(&k);
    trim(&v);
    if (!*k || !unescape(k) || !unescape(v))
      return bad(err, len, "%s='%s': an empty key or a broken %%XX escape in '%s'", name, text,
                 k);
    if (*n == cap)
      return bad(err, len, "%s has more than %d entries", name, cap);
    snprintf(out[*n].key, sizeof out[*n].key, "%s", k);
    snprintf(out[*n].value, sizeof out[*n].value, "%s", v);
    (*n)++;
  }
  return DIST_OK;
}

static int endpoint(tr_otlp_conf *c, const char *base, char *err, size_t len) {
  const char *name, *v;
  if (!base && (v = getenv("DIST_OTLP_ENDPOINT")) && *v)
    base = v, snprintf(c->from, sizeof c->from, "DIST_OTLP_ENDPOINT");
  else if (base)
    snprintf(c->from, sizeof c->from, "the command line");
  if (!base && (v = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) && *v) {
    snprintf(c->from, sizeof c->from, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    if (strlen(v) >= sizeof c->url)
      return bad(err, len, "%s is too long", c->from);
    snprintf(c->url, sizeof c->url, "%s", v); /* the whole URL, as the spec says */
  } else {
    if (!base && (base = otel("ENDPOINT", &name)))
      snprintf(c->from, sizeof c->from, "OTEL_EXPORTER_OTLP_ENDPOINT");
    if (!base)
      return DIST_OK; /* no endpoint: nothing to export */
    size_t n = strlen(base);
    while (n && base[n - 1] == '/')
      n--;
    if (n + 11 >= sizeof c->url)
      return bad(err, len, "%s is too long", c->from);
    snprintf(c->url, sizeof c->url, "%.*s/v1/traces", (int)n, base);
  }
  if (strncmp(c->url, "http://", 7) && strncmp(c->url, "https://", 8))
    return bad(err, len, "%s='%s': the endpoint needs http:// or https://", c->from, c->url);
  return DIST_OK;
}

static int transport(tr_otlp_conf *c, char *err, size_t len) {
  const char *name, *v;
  if ((v = otel("PROTOCOL", &name))) {
    if (!strcmp(v, "http/protobuf"))
      c->protobuf = true;
    else if (!strcmp(v, "grpc"))
      return bad(err, len, "%s=grpc: libdist sends OTLP over HTTP only; use http/protobuf or "
                 "http/json (a collector takes both on port 4318)", name);
    else if (strcmp(v, "http/json"))
      return bad(err, len, "%s='%s': http/protobuf or http/json", name, v);
  }
  if ((v = otel("COMPRESSION", &name))) {
    if (!strcmp(v, "gzip"))
      c->gzip = true;
    else if (strcmp(v, "none"))
      return bad(err, len, "%s='%s': gzip or none", name, v);
  }
  const struct {
    const char *what;
    char *dst;
  } files[] = {{"CERTIFICATE", c->ca}, {"CLIENT_CERTIFICATE", c->cert}, {"CLIENT_KEY", c->key}};
  for (size_t i = 0; i < 3; i++)
    if ((v = otel(files[i].what, &name))) {
      if (strlen(v) >= sizeof c->ca)
        return bad(err, len, "%s is too long", name);
      snprintf(files[i].dst, sizeof c->ca, "%s", v);
    }
  if ((v = otel("HEADERS", &name)))
    return tr_otlp_list_parse(name, v, c->headers, TR_OTLP_MAX_KV, &c->n_headers, err, len);
  return DIST_OK;
}

static int timeout(tr_otlp_conf *c, int64_t caller_ms, char *err, size_t len) {
  const char *name, *v;
  c->timeout_ms = caller_ms;
  if (caller_ms > 0 || !(v = otel("TIMEOUT", &name)))
    return DIST_OK;
  char *end;
  long long ms = strtoll(v, &end, 10); /* milliseconds, as the spec says */
  if (*end || end == v || ms <= 0 || ms > 3600000)
    return bad(err, len, "%s='%s': a number of milliseconds in [1, 3600000]", name, v);
  c->timeout_ms = ms;
  return DIST_OK;
}

int tr_otlp_conf_env(tr_otlp_conf *c, const char *base, int64_t timeout_ms, int64_t dflt_ms,
                     char *err, size_t len) {
  memset(c, 0, sizeof *c);
  int rc = endpoint(c, base, err, len);
  if (rc == DIST_OK && c->url[0])
    rc = transport(c, err, len);
  if (rc == DIST_OK && c->url[0])
    rc = timeout(c, timeout_ms, err, len);
  if (rc == DIST_OK && c->timeout_ms <= 0)
    c->timeout_ms = dflt_ms;
  tr_otlp_kv attrs[TR_OTLP_MAX_KV];
  int n;
  const char *ra = getenv("OTEL_RESOURCE_ATTRIBUTES");
  if (rc == DIST_OK && ra && *ra) /* checked here; read where resources are written */
    rc = tr_otlp_list_parse("OTEL_RESOURCE_ATTRIBUTES", ra, attrs, TR_OTLP_MAX_KV, &n, err, len);
  return rc;
}
