/* store_kv.c - the in-memory key/value engine (see store_kv.h).
 *
 * Four chained hash maps keyed by string share one entry type: values,
 * queues, waiters on keys and waiters on queues. Buckets double when the
 * load passes 1. Waiter entries exist only while someone waits, so a key
 * nobody waits for costs nothing on set beyond one failed lookup. */
#include "store_kv.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct qitem {
  struct qitem *next;
  size_t len;
  char *data; /* dist__malloc'd, NUL-terminated: handed out by pop */
} qitem;

typedef struct kv_wnode {
  struct kv_wnode *prev, *next;
  struct ent *owner; /* the waiters entry it is linked into; NULL when not */
  struct map *m;     /* the map holding owner */
  dist__kv_waiter *w;
} kv_wnode;

typedef struct ent {
  struct ent *next;
  uint64_t hash;
  union {
    struct {
      char *buf; /* len bytes + NUL */
      size_t len, cap;
      bool counter;
      int64_t num;
    } v;
    struct {
      qitem *head, *tail;
      int64_t n;
    } q;
    struct {
      kv_wnode *head, *tail;
    } w;
  } u;
  char key[];
} ent;

typedef struct map map;
struct map {
  ent **b;
  size_t nb, count;
};

struct dist__kv {
  map vals, queues, kwait, qwait;
};

/* --- the maps ---------------------------------------------------------------- */

static uint64_t hash_key(const char *k) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *k; k++)
    h = (h ^ (uint8_t)*k) * 1099511628211ull;
  return h ^ (h >> 29);
}

static int map_init(map *m) {
  m->nb = 64;
  m->count = 0;
  m->b = dist__calloc(m->nb, sizeof *m->b);
  return m->b ? DIST_OK : DIST_E_NOMEM;
}

static ent *map_find(const map *m, const char *key) {
  uint64_t h = hash_key(key);
  for (ent *e = m->b[h & (m->nb - 1)]; e; e = e->next)
    if (e->hash == h && strcmp(e->key, key) == 0)
      return e;
  return NULL;
}

static void map_grow(map *m) {
  size_t nb = m->nb * 2;
  ent **b = dist__calloc(nb, sizeof *b);
  if (!b)
    return; /* a fuller table is slower, never wrong */
  for (size_t i = 0; i < m->nb; i++)
    for (ent *e = m->b[i], *nx; e; e = nx) {
      nx = e->next;
      e->next = b[e->hash & (nb - 1)];
      b[e->hash & (nb - 1)] = e;
    }
  dist__free(m->b);
  m->b = b;
  m->nb = nb;
}

/* The entry for key, created zeroed when absent (NULL on OOM). */
static ent *map_get_or_add(map *m, const char *key, bool *created) {
  ent *e = map_find(m, key);
  *created = false;
  if (e)
    return e;
  size_t kl = strlen(key);
  e = dist__calloc(1, sizeof *e + kl + 1);
  if (!e)
    return NULL;
  memcpy(e->key, key, kl + 1);
  e->hash = hash_key(key);
  if (m->count >= m->nb)
    map_grow(m);
  e->next = m->b[e->hash & (m->nb - 1)];
  m->b[e->hash & (m->nb - 1)] = e;
  m->count++;
  *created = true;
  return e;
}

/* Unlinks e from m (the caller frees its payload and e). */
static void map_remove(map *m, ent *e) {
  ent **pp = &m->b[e->hash & (m->nb - 1)];
  while (*pp && *pp != e)
    pp = &(*pp)->next;
  if (*pp) {
    *pp = e->next;
    m->count--;
  }
}

static void free_queue(ent *e) {
  for (qitem *q = e->u.q.head, *nx; q; q = nx) {
    nx = q->next;
    dist__free(q->data);
    dist__free(q);
  }
}

/* Frees every entry; kind: 0 values, 1 queues, 2 waiters. */
static void map_free(map *m, int kind) {
  if (!m->b)
    return;
  for (size_t i = 0; i < m->nb; i++)
    for (ent *e = m->b[i], *nx; e; e = nx) {
      nx = e->next;
      if (kind == 0)
        dist__free(e->u.v.buf);
      else if (kind == 1)
        free_queue(e);
      else /* waiters outlive the engine only by mistake: detach them */
        for (kv_wnode *n = e->u.w.head; n; n = n->next)
          n->owner = NULL;
      dist__free(e);
    }
  dist__free(m->b);
  m->b = NULL;
}

int dist__kv_create(dist__kv **out) {
  dist__kv *kv = dist__calloc(1, sizeof *kv);
  if (!kv || map_init(&kv->vals) || map_init(&kv->queues) || map_init(&kv->kwait) ||
      map_init(&kv->qwait)) {
    dist__kv_destroy(kv);
    return dist__set_last_error(DIST_E_NOMEM, "out of memory creating a key/value table");
  }
  *out = kv;
  return DIST_OK;
}

void dist__kv_destroy(dist__kv *kv) {
  if (!kv)
    return;
  map_free(&kv->vals, 0);
  map_free(&kv->queues, 1);
  map_free(&kv->kwait, 2);
  map_free(&kv->qwait, 2);
  dist__free(kv);
}

/* --- waiters ----------------------------------------------------------------- */

static void node_unlink(map *m, kv_wnode *n) {
  ent *e = n->owner;
  if (!e)
    return;
  if (n->prev)
    n->prev->next = n->next;
  else
    e->u.w.head = n->next;
  if (n->next)
    n->next->prev = n->prev;
  else
    e->u.w.tail = n->prev;
  n->owner = NULL;
  n->prev = n->next = NULL;
  if (!e->u.w.head) {
    map_remove(m, e);
    dist__free(e);
  }
}

static int node_link(map *m, kv_wnode *n, const char *key) {
  bool created;
  ent *e = map_get_or_add(m, key, &created);
  if (!e)
    return DIST_E_NOMEM;
  n->prev = e->u.w.tail;
  n->next = NULL;
  if (e->u.w.tail)
    e->u.w.tail->next = n;
  else
    e->u.w.head = n;
  e->u.w.tail = n;
  n->owner = e;
  n->m = m;
  return DIST_OK;
}

static void run_wakes(dist__kv_waiter *list) {
  while (list) {
    dist__kv_waiter *nx = list->wake_next;
    list->wake_next = NULL;
    list->wake(list);
    list = nx;
  }
}

/* key now holds a value: every waiter whose last missing key it was wakes. */
static void notify_key(dist__kv *kv, const char *key) {
  ent *e = map_find(&kv->kwait, key);
  if (!e)
    return;
  dist__kv_waiter *wake = NULL;
  kv_wnode *n = e->u.w.head;
  /* Detach the whole list first: node_unlink frees e with the last node. */
  for (kv_wnode *x = n; x; x = x->next)
    x->owner = NULL;
  map_remove(&kv->kwait, e);
  dist__free(e);
  while (n) {
    kv_wnode *nx = n->next;
    n->prev = n->next = NULL;
    if (--n->w->missing == 0) {
      n->w->wake_next = wake;
      wake = n->w;
    }
    n = nx;
  }
  run_wakes(wake);
}

/* One item was pushed: the oldest queue waiter wakes. */
static void notify_queue(dist__kv *kv, const char *key) {
  ent *e = map_find(&kv->qwait, key);
  if (!e)
    return;
  kv_wnode *n = e->u.w.head;
  node_unlink(&kv->qwait, n);
  n->w->missing = 0;
  n->w->wake(n->w);
}

static int alloc_nodes(dist__kv_waiter *w, size_t n, dist__errbuf *e) {
  dist__kv_waiter keep = *w;
  memset(w, 0, sizeof *w);
  w->wake = keep.wake;
  w->arg = keep.arg;
  w->nodes = dist__calloc(n, sizeof *w->nodes);
  if (!w->nodes)
    return dist__err_set(e, DIST_E_NOMEM, "out of memory registering a waiter");
  w->nnodes = n;
  for (size_t i = 0; i < n; i++)
    w->nodes[i].w = w;
  return DIST_OK;
}

int dist__kv_watch_keys(dist__kv *kv, dist__kv_waiter *w, const char *const *keys,
                        size_t n, bool *registered, dist__errbuf *e) {
  size_t missing = 0;
  for (size_t i = 0; i < n; i++)
    missing += !dist__kv_has(kv, keys[i]);
  *registered = false;
  if (missing == 0)
    return DIST_OK;
  DIST_TRY(alloc_nodes(w, missing, e));
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (dist__kv_has(kv, keys[i]))
      continue;
    if (node_link(&kv->kwait, &w->nodes[j], keys[i]) != DIST_OK) {
      dist__kv_unwatch(kv, w);
      return dist__err_set(e, DIST_E_NOMEM, "out of memory registering a waiter");
    }
    j++;
    w->missing++;
  }
  *registered = true;
  return DIST_OK;
}

int dist__kv_watch_queue(dist__kv *kv, dist__kv_waiter *w, const char *key,
                         dist__errbuf *e) {
  DIST_TRY(alloc_nodes(w, 1, e));
  if (node_link(&kv->qwait, &w->nodes[0], key) != DIST_OK) {
    dist__kv_unwatch(kv, w);
    return dist__err_set(e, DIST_E_NOMEM, "out of memory registering a waiter");
  }
  w->missing = 1;
  return DIST_OK;
}

void dist__kv_unwatch(dist__kv *kv, dist__kv_waiter *w) {
  (void)kv;
  for (size_t i = 0; i < w->nnodes; i++) {
    kv_wnode *n = &w->nodes[i];
    if (n->owner)
      node_unlink(n->m, n);
  }
  dist__free(w->nodes);
  w->nodes = NULL;
  w->nnodes = 0;
  w->missing = 0;
}

/* --- values ------------------------------------------------------------------ */

bool dist__kv_get(dist__kv *kv, const char *key, const void **val, size_t *len) {
  ent *e = map_find(&kv->vals, key);
  if (!e)
    return false;
  *val = e->u.v.buf;
  *len = e->u.v.len;
  return true;
}

bool dist__kv_has(dist__kv *kv, const char *key) { return map_find(&kv->vals, key) != NULL; }

int64_t dist__kv_num_keys(dist__kv *kv) { return (int64_t)kv->vals.count; }

/* Makes room for len bytes + NUL in e's buffer. */
static int reserve(ent *e, size_t len) {
  if (e->u.v.buf && e->u.v.cap > len)
    return DIST_OK;
  size_t cap = len + 1 < 32 ? 32 : len + 1;
  if (e->u.v.cap && cap < e->u.v.cap * 2 && e->u.v.cap * 2 <= (size_t)DIST_STORE_MAX_VALUE + 1)
    cap = e->u.v.cap * 2; /* appends grow geometrically */
  char *b = dist__realloc(e->u.v.buf, cap);
  if (!b)
    return DIST_E_NOMEM;
  e->u.v.buf = b;
  e->u.v.cap = cap;
  return DIST_OK;
}

/* The value entry for key, created empty; NULL on OOM (message set). */
static ent *val_entry(dist__kv *kv, const char *key, bool *created, dist__errbuf *err) {
  ent *e = map_get_or_add(&kv->vals, key, created);
  if (e && *created && reserve(e, 0) != DIST_OK) {
    map_remove(&kv->vals, e);
    dist__free(e);
    e = NULL;
  }
  if (!e)
    dist__err_set(err, DIST_E_NOMEM, "out of memory storing key '%s'", key);
  else if (*created)
    e->u.v.buf[0] = '\0';
  return e;
}

static void drop_new(dist__kv *kv, ent *e) {
  map_remove(&kv->vals, e);
  dist__free(e->u.v.buf);
  dist__free(e);
}

static int write_val(dist__kv *kv, ent *e, bool created, const void *val, size_t len,
                     dist__errbuf *err) {
  if (reserve(e, len) != DIST_OK) {
    if (created)
      drop_new(kv, e);
    return dist__err_set(err, DIST_E_NOMEM, "out of memory for a value of %zu bytes", len);
  }
  if (len)
    memcpy(e->u.v.buf, val, len);
  e->u.v.buf[len] = '\0';
  e->u.v.len = len;
  e->u.v.counter = false;
  notify_key(kv, e->key);
  return DIST_OK;
}

int dist__kv_set(dist__kv *kv, const char *key, const void *val, size_t len,
                 dist__errbuf *err) {
  bool created;
  ent *e = val_entry(kv, key, &created, err);
  if (!e)
    return DIST_E_NOMEM;
  return write_val(kv, e, created, val, len, err);
}

int dist__kv_add(dist__kv *kv, const char *key, int64_t delta, int64_t *result,
                 dist__errbuf *err) {
  bool created;
  ent *e = val_entry(kv, key, &created, err);
  if (!e)
    return DIST_E_NOMEM;
  if (!created && !e->u.v.counter)
    return dist__err_set(err, DIST_E_INVAL, "add on key '%s', which holds a value written "
                         "by set (add works on counters only)", key);
  int64_t v;
  if (__builtin_add_overflow(e->u.v.num, delta, &v)) {
    if (created)
      drop_new(kv, e);
    return dist__err_set(err, DIST_E_INVAL, "add of %" PRId64 " to counter '%s' overflows",
                         delta, key);
  }
  /* The text form is kept up to date so get reads a counter like a value. */
  e->u.v.counter = true;
  e->u.v.num = v;
  e->u.v.len = (size_t)snprintf(e->u.v.buf, e->u.v.cap, "%" PRId64, v);
  *result = v;
  notify_key(kv, key);
  return DIST_OK;
}

int dist__kv_append(dist__kv *kv, const char *key, const void *val, size_t len,
                    dist__errbuf *err) {
  bool created;
  ent *e = val_entry(kv, key, &created, err);
  if (!e)
    return DIST_E_NOMEM;
  if (e->u.v.counter)
    return dist__err_set(err, DIST_E_INVAL, "append on key '%s', which holds a counter", key);
  size_t old = e->u.v.len;
  if (old + len > DIST_STORE_MAX_VALUE)
    return dist__err_set(err, DIST_E_INVAL, "append to '%s' would exceed %u bytes", key,
                         DIST_STORE_MAX_VALUE);
  if (reserve(e, old + len) != DIST_OK) {
    if (created)
      drop_new(kv, e);
    return dist__err_set(err, DIST_E_NOMEM, "out of memory appending to '%s'", key);
  }
  if (len)
    memcpy(e->u.v.buf + old, val, len);
  e->u.v.len = old + len;
  e->u.v.buf[old + len] = '\0';
  notify_key(kv, key);
  return DIST_OK;
}

int dist__kv_compare_set(dist__kv *kv, const char *key, const void *exp, size_t elen,
                         const void *des, size_t dlen, const void **res, size_t *rlen,
                         dist__errbuf *err) {
  ent *e = map_find(&kv->vals, key);
  bool swap = e ? e->u.v.len == elen && (elen == 0 || memcmp(e->u.v.buf, exp, elen) == 0)
                : elen == 0;
  if (!swap) {
    *res = e ? e->u.v.buf : exp;
    *rlen = e ? e->u.v.len : elen;
    return DIST_OK;
  }
  DIST_TRY(dist__kv_set(kv, key, des, dlen, err));
  return dist__kv_get(kv, key, res, rlen) ? DIST_OK : DIST_E_INTERNAL;
}

bool dist__kv_delete(dist__kv *kv, const char *key) {
  ent *e = map_find(&kv->vals, key);
  if (!e)
    return false;
  drop_new(kv, e);
  return true;
}

/* --- queues ------------------------------------------------------------------ */

int64_t dist__kv_queue_len(dist__kv *kv, const char *key) {
  ent *e = map_find(&kv->queues, key);
  return e ? e->u.q.n : 0;
}

int dist__kv_queue_push(dist__kv *kv, const char *key, const void *val, size_t len,
                        dist__errbuf *err) {
  qitem *q = dist__malloc(sizeof *q);
  char *d = dist__malloc(len + 1);
  bool created;
  ent *e = q && d ? map_get_or_add(&kv->queues, key, &created) : NULL;
  if (!e) {
    dist__free(q);
    dist__free(d);
    return dist__err_set(err, DIST_E_NOMEM, "out of memory pushing onto queue '%s'", key);
  }
  if (len)
    memcpy(d, val, len);
  d[len] = '\0';
  q->data = d;
  q->len = len;
  q->next = NULL;
  if (e->u.q.tail)
    e->u.q.tail->next = q;
  else
    e->u.q.head = q;
  e->u.q.tail = q;
  e->u.q.n++;
  notify_queue(kv, key);
  return DIST_OK;
}

bool dist__kv_queue_pop(dist__kv *kv, const char *key, void **val, size_t *len) {
  ent *e = map_find(&kv->queues, key);
  if (!e || !e->u.q.head)
    return false;
  qitem *q = e->u.q.head;
  e->u.q.head = q->next;
  if (!q->next)
    e->u.q.tail = NULL;
  *val = q->data;
  *len = q->len;
  dist__free(q);
  /* An empty queue leaves no entry behind, so churn does not leak keys. */
  if (--e->u.q.n == 0) {
    map_remove(&kv->queues, e);
    dist__free(e);
  }
  return true;
}
