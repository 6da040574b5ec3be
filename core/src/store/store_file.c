/* store_file.c - a store in a file shared by processes (torch's FileStore).
 *
 * DESIGN. The file is a log: a 16-byte header ("DISTFS" + version), then
 * records [magic u32][type u8][0 u8][0 u16][key_len u32][val_len u32][key]
 * [val][crc32 u32], little-endian, the CRC covering everything before it.
 * Each handle keeps a replica of the store (a store_kv engine) and the
 * offset it has applied up to; an operation locks the file, applies the
 * records other processes appended since (catch-up), and for a mutation
 * performs it on the replica (which validates it and computes the result)
 * and appends its record.
 *
 * Locks are open-file-description fcntl locks (F_OFD_SETLKW): shared for
 * readers, exclusive for writers. They exclude handles of one process too
 * (clones in other threads) and vanish when a process dies, so a writer
 * killed mid-write leaves at most a torn tail: readers stop at the first
 * incomplete or corrupt record, and the next writer truncates it away
 * before appending. Blocking operations poll with a growing sleep (1 ms up
 * to 32 ms) until the deadline; a poll that finds the file unchanged skips
 * the lock.
 *
 * world_size > 0: each handle created by dist_store_file_create (not its
 * clones) appends a "finished" record when destroyed, and the one that
 * brings the count to world_size removes the file (torch's numWorkers).
 *
 * Stale files. A job whose processes died leaves its file behind, and the
 * next job at that path would read its keys (its ranks, its verdict). So
 * each handle dist_store_file_create makes also holds a shared lock on a
 * byte far past any record (LIVE_BYTE, through a second descriptor: OFD
 * locks of one description merge) for its whole life. A new handle that
 * can take that byte exclusively finds no process of an earlier user
 * alive. The store itself keeps such a file (torch's FileStore outlives
 * its processes); the file:// rendezvous opens it with
 * dist__store_file_create_job, which empties it (under the data lock) and
 * says so, since a job's rendezvous keys are the earlier job's otherwise. */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"
#include "store_kv.h"

#define FS_MAGIC "DISTFS\0\1"
#define FS_HDR 16
#define REC_MAGIC 0x44524543u /* "CERD" on disk: record start */
#define REC_HDR 16
#define REC_TRAILER 4
#define READ_CHUNK (256u << 10)
#define POLL_MAX_MS 32
#define DATA_LEN ((off_t)1 << 60) /* the data lock's range: every record */
#define LIVE_BYTE DATA_LEN        /* holders' liveness lock, past the data */

enum { R_SET = 1, R_ADD, R_APPEND, R_DELETE, R_QPUSH, R_QPOP, R_FINISH };

typedef struct file_store {
  char *path;
  int fd;
  int live_fd; /* holds the shared liveness lock (handles that count) */
  int world_size;
  bool counts; /* destroy appends a "finished" record */
  dist__kv *kv;
  off_t pos;   /* replica is applied up to here (0: header not read) */
  int64_t finished;
  uint8_t *rb; /* read buffer */
  size_t rbcap;
} file_store;

static const dist__store_ops file_ops;

static file_store *F(dist_store *s) { return s->impl; }

/* --- crc32 (IEEE) ------------------------------------------------------------ */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
  pthread_once(&crc_once, crc_init);
  uint32_t c = 0xFFFFFFFFu;
  while (n--)
    c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* --- locking and I/O --------------------------------------------------------- */

static int lock_file(dist_store *s, short type) {
  struct flock fl = {0};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_len = DATA_LEN;
  int rc;
  do
    rc = fcntl(F(s)->fd, F_OFD_SETLKW, &fl);
  while (rc != 0 && errno == EINTR);
  if (rc != 0)
    return dist__err_sys(&s->err, errno, "locking file store %s", F(s)->path);
  return DIST_OK;
}

static void unlock_file(dist_store *s) {
  struct flock fl = {0};
  fl.l_type = F_UNLCK;
  fl.l_whence = SEEK_SET;
  fl.l_len = DATA_LEN;
  fcntl(F(s)->fd, F_OFD_SETLK, &fl);
}

static int pread_all(int fd, void *buf, size_t len, off_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return n == 0 ? EIO : errno;
    done += (size_t)n;
  }
  return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno;
    done += (size_t)n;
  }
  return 0;
}

static int reserve_rb(file_store *f, size_t n) {
  if (f->rbcap >= n)
    return DIST_OK;
  uint8_t *b = dist__realloc(f->rb, n);
  if (!b)
    return DIST_E_NOMEM;
  f->rb = b;
  f->rbcap = n;
  return DIST_OK;
}

/* Forgets the replica; the next catch-up rebuilds it from the file. */
static int reset_replica(dist_store *s) {
  file_store *f = F(s);
  dist__kv *kv;
  if (dist__kv_create(&kv) != DIST_OK)
    return dist__err_set(&s->err, DIST_E_NOMEM, "out of memory rebuilding a file store");
  dist__kv_destroy(f->kv);
  f->kv = kv;
  f->pos = 0;
  f->finished = 0;
  return DIST_OK;
}

/* --- catch-up ---------------------------------------------------------------- */

static void apply(file_store *f, int type, const char *key, const uint8_t *val,
                  size_t len) {
  dist__errbuf e;
  dist__err_clear(&e);
  int64_t r;
  void *p;
  size_t l;
  switch (type) {
  case R_SET: dist__kv_set(f->kv, key, val, len, &e); break;
  case R_ADD:
    if (len == 8)
      dist__kv_add(f->kv, key, (int64_t)((uint64_t)get32(val) | (uint64_t)get32(val + 4) << 32),
                   &r, &e);
    break;
  case R_APPEND: dist__kv_append(f->kv, key, val, len, &e); break;
  case R_DELETE: dist__kv_delete(f->kv, key); break;
  case R_QPUSH: dist__kv_queue_push(f->kv, key, val, len, &e); break;
  case R_QPOP:
    if (dist__kv_queue_pop(f->kv, key, &p, &l))
      dist__free(p);
    break;
  case R_FINISH: f->finished++; break;
  default: break;
  }
  if (e.msg[0])
    DIST_LOG(DEBUG, STORE, "file store %s: replaying a record: %s", f->path, e.msg);
}

/* Length of the valid record at b[0..avail), 0 when incomplete or corrupt;
 * *need is the length the record needs. */
static size_t parse_record(const uint8_t *b, size_t avail, size_t *need, bool *corrupt) {
  *need = REC_HDR;
  *corrupt = false;
  if (avail < REC_HDR)
    return 0;
  uint32_t kl = get32(b + 8), vl = get32(b + 12);
  if (get32(b) != REC_MAGIC || b[4] < R_SET || b[4] > R_FINISH || kl > DIST_STORE_MAX_KEY ||
      vl > DIST_STORE_MAX_VALUE) {
    *corrupt = true;
    return 0;
  }
  *need = REC_HDR + kl + vl + REC_TRAILER;
  if (avail < *need)
    return 0;
  if (crc32_of(b, *need - REC_TRAILER) != get32(b + *need - REC_TRAILER)) {
    *corrupt = true;
    return 0;
  }
  return *need;
}

/* Reads the header (writer: writes it into an empty file). */
static int read_header(dist_store *s, off_t size, bool writer) {
  file_store *f = F(s);
  uint8_t h[FS_HDR] = {0};
  if (size >= FS_HDR) {
    int err = pread_all(f->fd, h, FS_HDR, 0);
    if (err)
      return dist__err_sys(&s->err, err, "reading file store %s", f->path);
    if (memcmp(h, FS_MAGIC, 8) != 0)
      return dist__err_set(&s->err, DIST_E_STORE, "%s is not a libdist file store (bad "
                           "header)", f->path);
    f->pos = FS_HDR;
    return DIST_OK;
  }
  if (!writer)
    return DIST_OK; /* empty, or a header torn by a dead creator: nothing yet */
  memcpy(h, FS_MAGIC, 8);
  int err = ftruncate(f->fd, 0) ? errno : pwrite_all(f->fd, h, FS_HDR, 0);
  if (err)
    return dist__err_sys(&s->err, err, "writing file store %s", f->path);
  f->pos = FS_HDR;
  return DIST_OK;
}

/* Applies what others appended; a writer truncates a torn tail. Lock held. */
static int catch_up(dist_store *s, bool writer) {
  file_store *f = F(s);
  struct stat st;
  if (fstat(f->fd, &st) != 0)
    return dist__err_sys(&s->err, errno, "stat of file store %s", f->path);
  if (f->pos == 0 || st.st_size < f->pos) {
    if (f->pos != 0) /* shrunk under us: somebody rewrote the file */
      DIST_TRY(reset_replica(s));
    DIST_TRY(read_header(s, st.st_size, writer));
    if (f->pos == 0)
      return DIST_OK;
  }
  bool corrupt = false;
  size_t need = 0;
  while (f->pos < st.st_size && !corrupt) {
    size_t left = (size_t)(st.st_size - f->pos);
    size_t want = need > READ_CHUNK ? need : READ_CHUNK;
    want = want < left ? want : left;
    if (reserve_rb(f, want) != DIST_OK)
      return dist__err_set(&s->err, DIST_E_NOMEM, "out of memory reading %s", f->path);
    int err = pread_all(f->fd, f->rb, want, f->pos);
    if (err)
      return dist__err_sys(&s->err, err, "reading file store %s", f->path);
    size_t off = 0, n;
    while ((n = parse_record(f->rb + off, want - off, &need, &corrupt)) > 0) {
      const uint8_t *b = f->rb + off;
      uint32_t kl = get32(b + 8);
      char *key = dist__strndup((const char *)b + REC_HDR, kl);
      if (!key)
        return dist__err_set(&s->err, DIST_E_NOMEM, "out of memory reading %s", f->path);
      apply(f, b[4], key, b + REC_HDR + kl, get32(b + 12));
      dist__free(key);
      off += n;
      f->pos += (off_t)n;
    }
    /* Stop at a torn or corrupt tail; else read on (a bigger read when the
     * next record did not fit this one). */
    if (corrupt || f->pos + (off_t)need > st.st_size || (off == 0 && need <= want))
      break;
  }
  if (writer && f->pos < st.st_size) {
    DIST_LOG(WARNING, STORE, "file store %s: removing %lld bytes of torn record at offset "
             "%lld (a writer died mid-write)", f->path, (long long)(st.st_size - f->pos),
             (long long)f->pos);
    if (ftruncate(f->fd, f->pos) != 0)
      return dist__err_sys(&s->err, errno, "truncating file store %s", f->path);
  }
  return DIST_OK;
}

/* Locks and catches up; on failure nothing stays locked. */
static int begin(dist_store *s, short type) {
  DIST_TRY(lock_file(s, type));
  int rc = catch_up(s, type == F_WRLCK);
  if (rc != DIST_OK)
    unlock_file(s);
  return rc;
}

/* Brings the replica up to date; skips the lock when the file has not grown
 * since (records are only ever appended, or a torn tail cut). */
static int refresh(dist_store *s) {
  struct stat st;
  if (F(s)->pos != 0 && fstat(F(s)->fd, &st) == 0 && st.st_size == F(s)->pos)
    return DIST_OK;
  DIST_TRY(begin(s, F_RDLCK));
  unlock_file(s);
  return DIST_OK;
}

typedef struct rec {
  int type;
  const char *key;
  const void *val;
  size_t len;
} rec;

/* Appends records at the end (write lock held, caught up). A failed write
 * is cut off again and the replica, already changed, is rebuilt. */
static int append_records(dist_store *s, const rec *r, size_t n) {
  file_store *f = F(s);
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += REC_HDR + strlen(r[i].key) + r[i].len + REC_TRAILER;
  uint8_t *buf = dist__malloc(total);
  if (!buf) {
    reset_replica(s);
    return dist__err_set(&s->err, DIST_E_NOMEM, "out of memory writing %s", f->path);
  }
  uint8_t *p = buf;
  for (size_t i = 0; i < n; i++) {
    size_t kl = strlen(r[i].key);
    put32(p, REC_MAGIC);
    p[4] = (uint8_t)r[i].type;
    p[5] = p[6] = p[7] = 0;
    put32(p + 8, (uint32_t)kl);
    put32(p + 12, (uint32_t)r[i].len);
    memcpy(p + REC_HDR, r[i].key, kl);
    if (r[i].len)
      memcpy(p + REC_HDR + kl, r[i].val, r[i].len);
    size_t body = REC_HDR + kl + r[i].len;
    put32(p + body, crc32_of(p, body));
    p += body + REC_TRAILER;
  }
  int err = pwrite_all(f->fd, buf, total, f->pos);
  dist__free(buf);
  if (err) {
    if (ftruncate(f->fd, f->pos) != 0)
      DIST_LOG(WARNING, STORE, "file store %s: cannot cut a failed write: %s", f->path,
               strerror(errno));
    reset_replica(s);
    return dist__err_sys(&s->err, err, "writing file store %s", f->path);
  }
  f->pos += (off_t)total;
  return DIST_OK;
}

/* A single-record mutation already applied to the replica by rc's op. */
static int commit1(dist_store *s, int rc, int type, const char *key, const void *val,
                   size_t len) {
  if (rc == DIST_OK) {
    rec r = {type, key, val, len};
    rc = append_records(s, &r, 1);
  }
  unlock_file(s);
  return rc;
}

/* --- ops ----------------------------------------------------------------------- */

static int f_set(dist_store *s, const char *key, const void *val, size_t len) {
  DIST_TRY(begin(s, F_WRLCK));
  return commit1(s, dist__kv_set(F(s)->kv, key, val, len, &s->err), R_SET, key, val, len);
}

static int f_add(dist_store *s, const char *key, int64_t delta, int64_t *result) {
  DIST_TRY(begin(s, F_WRLCK));
  uint8_t d[8];
  put32(d, (uint32_t)(uint64_t)delta);
  put32(d + 4, (uint32_t)((uint64_t)delta >> 32));
  return commit1(s, dist__kv_add(F(s)->kv, key, delta, result, &s->err), R_ADD, key, d, 8);
}

static int f_append(dist_store *s, const char *key, const void *val, size_t len) {
  DIST_TRY(begin(s, F_WRLCK));
  return commit1(s, dist__kv_append(F(s)->kv, key, val, len, &s->err), R_APPEND, key, val,
                 len);
}

static int f_compare_set(dist_store *s, const char *key, const void *exp, size_t elen,
                         const void *des, size_t dlen, void **res, size_t *rlen) {
  DIST_TRY(begin(s, F_WRLCK));
  const void *cur;
  size_t cl;
  bool present = dist__kv_get(F(s)->kv, key, &cur, &cl);
  bool swap = present ? cl == elen && (elen == 0 || memcmp(cur, exp, elen) == 0) : elen == 0;
  const void *r;
  int rc = dist__kv_compare_set(F(s)->kv, key, exp, elen, des, dlen, &r, rlen, &s->err);
  if (rc == DIST_OK && swap) {
    rec w = {R_SET, key, des, dlen};
    rc = append_records(s, &w, 1);
  }
  if (rc == DIST_OK)
    rc = dist__store_dup_value(&s->err, r, *rlen, res);
  unlock_file(s);
  return rc;
}

static int f_delete_key(dist_store *s, const char *key, bool *deleted) {
  DIST_TRY(begin(s, F_WRLCK));
  *deleted = dist__kv_delete(F(s)->kv, key);
  if (!*deleted) {
    unlock_file(s);
    return DIST_OK;
  }
  return commit1(s, DIST_OK, R_DELETE, key, NULL, 0);
}

static int f_multi_set(dist_store *s, const char *const *keys, const void *const *vals,
                       const size_t *lens, size_t n) {
  rec *r = dist__calloc(n, sizeof *r);
  if (!r)
    return dist__err_set(&s->err, DIST_E_NOMEM, "out of memory in multi_set");
  int rc = begin(s, F_WRLCK);
  if (rc == DIST_OK) {
    for (size_t i = 0; i < n && rc == DIST_OK; i++) {
      r[i] = (rec){R_SET, keys[i], vals[i], lens[i]};
      rc = dist__kv_set(F(s)->kv, keys[i], vals[i], lens[i], &s->err);
    }
    if (rc == DIST_OK)
      rc = append_records(s, r, n);
    else
      reset_replica(s); /* the sets done so far reached the replica only */
    unlock_file(s);
  }
  dist__free(r);
  return rc;
}

static int f_queue_push(dist_store *s, const char *key, const void *val, size_t len) {
  DIST_TRY(begin(s, F_WRLCK));
  return commit1(s, dist__kv_queue_push(F(s)->kv, key, val, len, &s->err), R_QPUSH, key,
                 val, len);
}

static int f_check(dist_store *s, const char *const *keys, size_t n, bool *all) {
  DIST_TRY(refresh(s));
  for (size_t i = 0; i < n && *all; i++)
    *all = dist__kv_has(F(s)->kv, keys[i]);
  return DIST_OK;
}

static int f_num_keys(dist_store *s, int64_t *n) {
  DIST_TRY(refresh(s));
  *n = dist__kv_num_keys(F(s)->kv);
  return DIST_OK;
}

static int f_queue_len(dist_store *s, const char *key, int64_t *len) {
  DIST_TRY(refresh(s));
  *len = dist__kv_queue_len(F(s)->kv, key);
  return DIST_OK;
}

/* Polls until every key exists or the timeout passes. */
static int poll_keys(dist_store *s, const char *const *keys, size_t n, int64_t timeout_ms,
                     const char *what) {
  int64_t deadline = dist__deadline_ms(timeout_ms), nap = 1;
  for (;;) {
    DIST_TRY(refresh(s));
    size_t i = 0;
    while (i < n && dist__kv_has(F(s)->kv, keys[i]))
      i++;
    if (i == n)
      return DIST_OK;
    int64_t left = dist__remaining_ms(deadline);
    if (left == 0)
      break;
    dist__sleep_ms(nap < left ? nap : left);
    nap = nap * 2 > POLL_MAX_MS ? POLL_MAX_MS : nap * 2;
  }
  bool *present = dist__calloc(n, sizeof *present); /* NULL: name them all */
  for (size_t i = 0; present && i < n; i++)
    present[i] = dist__kv_has(F(s)->kv, keys[i]);
  int rc = dist__store_timeout(&s->err, timeout_ms, what, keys, n, present);
  dist__free(present);
  return rc;
}

static int f_wait(dist_store *s, const char *const *keys, size_t n, int64_t timeout_ms) {
  return poll_keys(s, keys, n, timeout_ms, "wait");
}

static int f_multi_get(dist_store *s, const char *const *keys, size_t n,
                       int64_t timeout_ms, void **vals, size_t *lens) {
  int rc = poll_keys(s, keys, n, timeout_ms, n == 1 ? "get" : "multi_get");
  for (size_t i = 0; i < n && rc == DIST_OK; i++) {
    const void *v;
    if (!dist__kv_get(F(s)->kv, keys[i], &v, &lens[i]))
      rc = dist__err_set(&s->err, DIST_E_INTERNAL, "key '%s' vanished", keys[i]);
    else
      rc = dist__store_dup_value(&s->err, v, lens[i], &vals[i]);
  }
  if (rc != DIST_OK)
    for (size_t i = 0; i < n; i++) {
      dist__free(vals[i]);
      vals[i] = NULL;
    }
  return rc;
}

static int f_get(dist_store *s, const char *key, int64_t timeout_ms, void **val,
                 size_t *len) {
  return f_multi_get(s, &key, 1, timeout_ms, val, len);
}

static int f_queue_pop(dist_store *s, const char *key, bool block, int64_t timeout_ms,
                       void **val, size_t *len) {
  int64_t deadline = dist__deadline_ms(block ? timeout_ms : 0), nap = 1;
  for (;;) {
    DIST_TRY(refresh(s));
    if (dist__kv_queue_len(F(s)->kv, key) > 0) {
      DIST_TRY(begin(s, F_WRLCK));
      if (dist__kv_queue_pop(F(s)->kv, key, val, len))
        return commit1(s, DIST_OK, R_QPOP, key, NULL, 0);
      unlock_file(s); /* another process won the item */
      continue;
    }
    int64_t left = dist__remaining_ms(deadline);
    if (left == 0)
      break;
    dist__sleep_ms(nap < left ? nap : left);
    nap = nap * 2 > POLL_MAX_MS ? POLL_MAX_MS : nap * 2;
  }
  return block ? dist__store_timeout(&s->err, timeout_ms, "queue_pop", &key, 1, NULL)
               : dist__err_set(&s->err, DIST_E_TIMEOUT, "queue '%s' is empty", key);
}

/* --- lifecycle ----------------------------------------------------------------- */

static int open_store(const char *path, int world_size, bool counts, bool reset_stale,
                      dist_store **out, dist__errbuf *e);

static int f_clone(dist_store *s, dist_store **out) {
  return open_store(F(s)->path, F(s)->world_size, false, false, out, &s->err);
}

static void free_impl(file_store *f) {
  if (f->fd >= 0)
    close(f->fd);
  if (f->live_fd >= 0)
    close(f->live_fd); /* drops the liveness lock */
  dist__kv_destroy(f->kv);
  dist__free(f->rb);
  dist__free(f->path);
  dist__free(f);
}

/* The world_size-th finished handle removes the file (torch's FileStore). */
static void finish(dist_store *s) {
  file_store *f = F(s);
  if (begin(s, F_WRLCK) != DIST_OK) {
    DIST_LOG(WARNING, STORE, "file store %s: cannot record this handle's end: %s", f->path,
             s->err.msg);
    return;
  }
  rec r = {R_FINISH, "", NULL, 0};
  if (append_records(s, &r, 1) == DIST_OK && ++f->finished >= f->world_size &&
      unlink(f->path) != 0 && errno != ENOENT)
    DIST_LOG(WARNING, STORE, "file store %s: cannot remove it: %s", f->path, strerror(errno));
  unlock_file(s);
}

static void f_destroy(dist_store *s) {
  if (F(s)->counts && F(s)->world_size > 0)
    finish(s);
  free_impl(F(s));
}

static const dist__store_ops file_ops = {
    .kind = "file",
    .set = f_set,
    .get = f_get,
    .add = f_add,
    .append = f_append,
    .check = f_check,
    .compare_set = f_compare_set,
    .delete_key = f_delete_key,
    .multi_get = f_multi_get,
    .multi_set = f_multi_set,
    .num_keys = f_num_keys,
    .wait = f_wait,
    .queue_push = f_queue_push,
    .queue_pop = f_queue_pop,
    .queue_len = f_queue_len,
    .clone = f_clone,
    .destroy = f_destroy,
};

const char *dist_store_file_path(const dist_store *s) {
  return s && s->ops == &file_ops ? ((const file_store *)s->impl)->path : NULL;
}

/* Whether the file starts with a store's header (never empty a file that is
 * not a store: opening it fails with DIST_E_STORE instead). */
static bool is_store_file(int fd) {
  char magic[8];
  return pread(fd, magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
         memcmp(magic, FS_MAGIC, sizeof magic) == 0;
}

/* The liveness byte on f->live_fd: exclusively for a moment if nobody holds
 * it (then an existing file is an earlier user's, emptied when reset_stale),
 * then shared for the handle's life. Under the data lock, so two new
 * handles never both decide. */
static int hold(dist_store *s, bool reset_stale) {
  file_store *f = F(s);
  f->live_fd = open(f->path, O_RDWR | O_CLOEXEC);
  if (f->live_fd < 0)
    return dist__err_sys(&s->err, errno, "cannot open file store %s", f->path);
  DIST_TRY(lock_file(s, F_WRLCK));
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LIVE_BYTE, .l_len = 1};
  struct stat st;
  if (fcntl(f->live_fd, F_OFD_SETLK, &fl) == 0 && reset_stale && fstat(f->fd, &st) == 0 &&
      st.st_size > 0 && is_store_file(f->fd)) {
    DIST_LOG(WARNING, STORE, "file store %s was left by an earlier job whose processes have "
             "all exited (%lld bytes); starting it afresh", f->path, (long long)st.st_size);
    if (ftruncate(f->fd, 0) != 0) {
      int err = errno;
      unlock_file(s);
      return dist__err_sys(&s->err, err, "file store %s is stale and cannot be emptied "
                           "(remove it)", f->path);
    }
  }
  fl.l_type = F_RDLCK;
  int rc;
  do
    rc = fcntl(f->live_fd, F_OFD_SETLKW, &fl);
  while (rc != 0 && errno == EINTR);
  int err = errno;
  unlock_file(s);
  return rc == 0 ? DIST_OK : dist__err_sys(&s->err, err, "locking file store %s", f->path);
}

static int open_store(const char *path, int world_size, bool counts, bool reset_stale,
                      dist_store **out, dist__errbuf *e) {
  file_store *f = dist__calloc(1, sizeof *f);
  if (!f)
    return dist__err_set(e, DIST_E_NOMEM, "out of memory opening file store %s", path);
  f->fd = f->live_fd = -1;
  f->world_size = world_size;
  f->counts = counts;
  f->path = dist__strdup(path);
  if (!f->path || dist__kv_create(&f->kv) != DIST_OK) {
    free_impl(f);
    return dist__err_set(e, DIST_E_NOMEM, "out of memory opening file store %s", path);
  }
  f->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (f->fd < 0) {
    int err = errno;
    free_impl(f);
    return dist__err_sys(e, err, "cannot open file store %s", path);
  }
  int rc = dist__store_new(&file_ops, f, out);
  if (rc != DIST_OK) {
    free_impl(f);
    return rc;
  }
  if (counts && (rc = hold(*out, reset_stale)) != DIST_OK) {
    dist__err_set(e, rc, "%s", (*out)->err.msg);
    free_impl(f);
    dist__free(*out);
    *out = NULL;
    return rc;
  }
  /* Validate the header (or write it into a new file) now, so a wrong path
   * fails here; an existing store is only read. */
  struct stat st;
  bool fresh = fstat(f->fd, &st) != 0 || st.st_size < FS_HDR;
  rc = begin(*out, fresh ? F_WRLCK : F_RDLCK);
  if (rc == DIST_OK) {
    unlock_file(*out);
  } else {
    dist__err_set(e, rc, "%s", (*out)->err.msg);
    free_impl(f);
    dist__free(*out);
    *out = NULL;
  }
  return rc;
}

static int create(const char *path, int world_size, bool reset_stale, dist_store **out) {
  if (!out)
    return dist__set_last_error(DIST_E_INVAL, "dist_store_file_create: out is NULL");
  *out = NULL;
  if (!path || !*path)
    return dist__set_last_error(DIST_E_INVAL, "dist_store_file_create: path is empty");
  if (world_size == 0 || world_size < -1)
    return dist__set_last_error(DIST_E_INVAL, "dist_store_file_create: world_size must "
                                "be > 0 or -1 (got %d)", world_size);
  return open_store(path, world_size, true, reset_stale, out, NULL);
}

int dist_store_file_create(const char *path, int world_size, dist_store **out) {
  return create(path, world_size, false, out);
}

int dist__store_file_create_job(const char *path, int world_size, dist_store **out) {
  return create(path, world_size, true, out);
}
