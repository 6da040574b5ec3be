/* otlp_http.c - one OTLP/HTTP JSON request through libcurl (otlp_int.h).
 * Every request is bounded by its timeout, so a dead collector is an
 * error after timeout_ms, never a hang; and a caller that is ending can
 * cut it shorter (libcurl's progress callback reads the deadline). */
#include "otlp_int.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

int tr_otlp_post(const char *endpoint, const char *body, size_t len, int64_t timeout_ms,
                 _Atomic int64_t *cancel_at, char *err, size_t errlen) {
  pthread_once(&curl_once, curl_start);
  char url[2048];
  size_t el = strlen(endpoint);
  while (el && endpoint[el - 1] == '/')
    el--;
  snprintf(url, sizeof url, "%.*s/v1/traces", (int)el, endpoint);
  CURL *c = curl_easy_init();
  if (!c) {
    snprintf(err, errlen, "cannot start libcurl");
    return DIST_E_SYS;
  }
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  answer a = {.len = 0};
  a.text[0] = '\0';
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
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
