/* otlp_http.c - one OTLP/HTTP request through libcurl (otlp_int.h): JSON
 * or protobuf (transcoded, otlp_pb.c), gzip-compressed with zlib when
 * asked (libcurl compresses answers, never requests), the configured
 * headers, and for https the CA bundle and client pair the variables name
 * (otlp_conf.c). Every request is bounded by its timeout, so a dead
 * collector is an error after timeout_ms, never a hang; and a caller that
 * is ending can cut it shorter (libcurl's progress callback reads the
 * deadline). */
#include "otlp_int.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_start(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct answer {
  char text[256];
  size_t len;
} answer;

static int check_cancel(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  (void)dt, (void)dn, (void)ut, (void)un;
  int64_t at = atomic_load((_Atomic int64_t *)arg);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return at && (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec >= at; /* non-zero aborts */
}

static size_t keep_answer(char *p, size_t size, size_t n, void *arg) {
  answer *a = arg;
  size_t total = size * n, room = sizeof a->text - 1 - a->len;
  size_t take = total < room ? total : room;
  memcpy(a->text + a->len, p, take);
  a->len += take;
  a->text[a->len] = '\0';
  return total;
}

/* gzip of in[0, n) into malloc'd *out; false when zlib fails. */
static bool gzip(const void *in, size_t n, unsigned char **out, size_t *out_len) {
  z_stream z = {0};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return false; /* 15 + 16: a gzip header and trailer, not zlib's */
  size_t cap = deflateBound(&z, (uLong)n);
  unsigned char *o = malloc(cap);
  z.next_in = (Bytef *)in;
  z.avail_in = (uInt)n;
  z.next_out = o;
  z.avail_out = (uInt)cap;
  int rc = o ? deflate(&z, Z_FINISH) : Z_MEM_ERROR;
  *out_len = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) {
    free(o);
    return false;
  }
  *out = o;
  return true;
}

/* The body as it goes on the wire (transcoded, compressed); *owned is
 * what to free. */
static int wire_body(const tr_otlp_conf *c, const char *body, size_t len, const void **wire,
                     size_t *wire_len, unsigned char **owned, char *err, size_t errlen) {
  unsigned char *pbuf = NULL, *z = NULL;
  *wire = body;
  *wire_len = len;
  *owned = NULL;
  if (c->protobuf) {
    int rc = tr_otlp_json_to_pb(body, len, &pbuf, wire_len, err, errlen);
    if (rc != DIST_OK)
      return rc;
    *wire = pbuf;
  }
  if (c->gzip) {
    size_t zl;
    if (!gzip(*wire, *wire_len, &z, &zl)) {
      free(pbuf);
      snprintf(err, errlen, "gzip of an OTLP request failed (zlib)");
      return DIST_E_NOMEM;
    }
    free(pbuf);
    pbuf = NULL;
    *wire = z;
    *wire_len = zl;
  }
  *owned = z ? z : pbuf;
  return DIST_OK;
}

static struct curl_slist *headers(const tr_otlp_conf *c) {
  struct curl_slist *h = curl_slist_append(
      NULL, c->protobuf ? "Content-Type: application/x-protobuf" : "Content-Type: application/json");
  if (c->gzip)
    h = curl_slist_append(h, "Content-Encoding: gzip");
  for (int i = 0; h && i < c->n_headers; i++) {
    char line[700];
    snprintf(line, sizeof line, "%s: %s", c->headers[i].key, c->headers[i].value);
    h = curl_slist_append(h, line);
  }
  return h;
}

static void tls(CURL *h, const tr_otlp_conf *c) {
  if (c->ca[0])
    curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
  if (c->cert[0])
    curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
  if (c->key[0])
    curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
}

int tr_otlp_post(const tr_otlp_conf *conf, const char *body, size_t len, int64_t timeout_ms,
                 _Atomic int64_t *cancel_at, char *err, size_t errlen) {
  pthread_once(&curl_once, curl_start);
  const char *url = conf->url;
  const void *wire;
  size_t wire_len;
  unsigned char *owned;
  int brc = wire_body(conf, body, len, &wire, &wire_len, &owned, err, errlen);
  if (brc != DIST_OK)
    return brc;
  CURL *c = curl_easy_init();
  if (!c) {
    free(owned);
    snprintf(err, errlen, "cannot start libcurl");
    return DIST_E_SYS;
  }
  struct curl_slist *hdr = headers(conf);
  answer a = {.len = 0};
  a.text[0] = '\0';
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, wire);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)wire_len);
  tls(c, conf);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
  if (cancel_at) {
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, check_cancel);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)cancel_at);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  }
  CURLcode cc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(hdr);
  curl_easy_cleanup(c);
  free(owned);
  if (cc != CURLE_OK) {
    snprintf(err, errlen, "OTLP collector %s: %s", url,
             cc == CURLE_ABORTED_BY_CALLBACK ? "cancelled at the end of the job"
                                             : curl_easy_strerror(cc));
    return DIST_E_SYS;
  }
  if (code < 200 || code > 299) {
    snprintf(err, errlen, "OTLP collector %s answered HTTP %ld: %s", url, code, a.text);
    return DIST_E_BACKEND;
  }
  return DIST_OK;
}
