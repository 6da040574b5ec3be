/* ring_import.c - a `.ring` side file (the raw ring a dying rank wrote
 * from its signal handler, tracer_crash.c) folded into a merged database.
 *
 * The file is checked (magic, version, slot size; a dump cut short keeps
 * the records it holds), its complete records are decoded through the record sink
 * into a scratch database with the rank schema, and that is merged into
 * main with the rank's clock offset: operations the rank file lacks are
 * added, those it has take the ring's state when it is further along
 * (newest state wins), events newer than the rank file's last are added,
 * with their call sites placed by the dumped maps (ring_callsites.c).
 * The rank is marked 'crashed' and a 'crash' event names the signal; a
 * rank that was ended (SIGTERM, SIGINT, SIGHUP: distrun ending the job, a
 * user's Ctrl-C) is marked 'ended' with an 'ended' event instead. */
#define _GNU_SOURCE
#include "reader_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct ring_img {
  tr_ring_file hdr;
  const unsigned char *slots;
} ring_img;

static int img_get(void *arg, uint64_t idx, void *slot) {
  const ring_img *r = arg;
  const unsigned char *p = r->slots + (idx & (r->hdr.slots - 1)) * TR_SLOT;
  memcpy(slot, p, TR_SLOT);
  return *(const uint64_t *)slot == idx + 1 ? 1 : -1;
}

static int load(const char *path, ring_img *img, unsigned char **buf, char *err, size_t len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, len, "cannot open");
    return -1;
  }
  struct stat st;
  fstat(fileno(f), &st);
  int rc = -1;
  if (fread(&img->hdr, sizeof img->hdr, 1, f) != 1 ||
      memcmp(img->hdr.magic, TR_RING_MAGIC, 8) != 0) {
    snprintf(err, len, "not a libdist ring dump");
  } else if (img->hdr.version != 1 || img->hdr.slot_size != TR_SLOT || img->hdr.slots < 64 ||
             (img->hdr.slots & (img->hdr.slots - 1)) || img->hdr.slots > ((uint64_t)1 << 30)) {
    snprintf(err, len, "unknown ring dump format (version %u, slot %u)", img->hdr.version,
             img->hdr.slot_size);
  } else if ((uint64_t)st.st_size > sizeof img->hdr + img->hdr.slots * TR_SLOT) {
    snprintf(err, len, "ring dump longer than its header says (%lld bytes, want %llu)",
             (long long)st.st_size,
             (unsigned long long)(sizeof img->hdr + img->hdr.slots * TR_SLOT));
  } else if (!(*buf = calloc(img->hdr.slots, TR_SLOT))) {
    snprintf(err, len, "out of memory");
  } else {
    /* A dump cut short (the rank was killed while writing it) keeps what
     * it wrote: the missing slots stay zero, which no record's check
     * matches, so they decode as lost records, not as garbage. */
    (void)!fread(*buf, TR_SLOT, img->hdr.slots, f);
    img->slots = *buf;
    rc = 0;
  }
  fclose(f);
  return rc;
}

/* Decodes the image into a scratch database file. */
static int decode(const ring_img *img, int rank, const char *scratch, char *err, size_t len) {
  sqlite3 *db;
  if (sqlite3_open(scratch, &db) != SQLITE_OK) {
    snprintf(err, len, "scratch database: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return -1;
  }
  tr_sink *sink = NULL;
  tr_sink_opts so = {.rank = rank, .symbolise = false};
  int rc = -1;
  if (tr_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN", err, len) ||
      tr_schema_create_rank(db, rank, err, len))
    goto out;
  if (tr_sink_open(db, &so, &sink) != 0) {
    snprintf(err, len, "%s", tr_sink_error(sink));
    goto out;
  }
  uint64_t head = img->hdr.head, n = img->hdr.slots, lost = 0;
  tr_decode_range(sink, img_get, (void *)img, head > n ? head - n : 0, head, &lost);
  tr_sink_flush(sink);
  rc = tr_exec(db, "COMMIT", err, len);
out:
  tr_sink_close(sink);
  sqlite3_close(db);
  return rc;
}

static bool ended_by_request(int sig) {
  return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

static int fold(sqlite3 *db, const ring_img *img, int rank, const char *scratch,
                const char *maps, char *err, size_t len) {
  const char *state = ended_by_request((int)img->hdr.signal) ? "ended" : "crashed";
  const char *how = ended_by_request((int)img->hdr.signal) ? "ended" : "killed";
  char *sql = sqlite3_mprintf(
      "CREATE TEMP TABLE IF NOT EXISTS roff(v INTEGER, last INTEGER); DELETE FROM roff;"
      "INSERT INTO roff SELECT coalesce((SELECT clock_offset_ns FROM main.ranks WHERE rank=%d), 0),"
      " coalesce((SELECT max(t_ns) FROM main.events WHERE rank=%d), -(1<<62));"
      "INSERT OR IGNORE INTO main.ranks VALUES (%d, '', 0, 'cpu', NULL, 0, -1,"
      " coalesce((SELECT unix_minus_mono_ns FROM main.job), 0), NULL, %lld, %Q, 0);"
      "UPDATE main.ranks SET end_state = %Q WHERE rank = %d;"
      "INSERT INTO main.operations SELECT rank, group_id, seq, op, is_async, state, dtype, shape,"
      " n_inputs, n_outputs, numel_in, numel_out, bytes_in, bytes_out, root, tag, redop,"
      " timeout_ms, t_enqueued_ns + (SELECT v FROM roff), t_started_ns + (SELECT v FROM roff),"
      " t_ended_ns + (SELECT v FROM roff), status, message, (SELECT new FROM temp.ring_cs"
      " WHERE old = o.callsite_id), pair_seq FROM rs.operations o"
      " WHERE true ON CONFLICT(group_id, p2p, seq, rank) DO UPDATE SET state = excluded.state,"
      " t_started_ns = coalesce(operations.t_started_ns, excluded.t_started_ns),"
      " t_ended_ns = excluded.t_ended_ns, status = excluded.status,"
      " message = coalesce(excluded.message, operations.message),"
      " callsite_id = coalesce(operations.callsite_id, excluded.callsite_id)"
      " WHERE operations.t_ended_ns IS NULL AND (excluded.t_ended_ns IS NOT NULL OR"
      " (operations.t_started_ns IS NULL AND excluded.t_started_ns IS NOT NULL));"
      "INSERT INTO main.events SELECT rank, group_id, seq, kind, t_ns + (SELECT v FROM roff),"
      " status, peer, message FROM rs.events WHERE t_ns + (SELECT v FROM roff) >"
      " (SELECT last FROM roff) AND kind != 'clock_offset';"
      "INSERT OR IGNORE INTO main.groups SELECT * FROM rs.groups;"
      "INSERT INTO main.events VALUES (%d, NULL, NULL, %Q, %lld + (SELECT v FROM roff),"
      " %d, NULL, '%s by signal %d (%q); its ring was dumped to a side file and imported');",
      rank, rank, rank, (long long)img->hdr.t_ns, state, state, rank, rank,
      strcmp(state, "ended") ? "crash" : "ended", (long long)img->hdr.t_ns, img->hdr.signal,
      how, img->hdr.signal,
      strsignal(img->hdr.signal) ? strsignal(img->hdr.signal) : "?");
  char *att = sqlite3_mprintf("ATTACH %Q AS rs", scratch);
  int rc = tr_exec(db, att, err, len); /* outside the transaction */
  sqlite3_free(att);
  if (rc == 0) {
    tr_exec(db, "BEGIN", NULL, 0);
    /* best effort: the records come in whatever happens to their call
     * sites (an unplaced one stays a bare address, an unmapped one NULL) */
    (void)tr_ring_callsites(db, rank, maps);
    rc = tr_exec(db, sql, err, len);
    tr_exec(db, rc == 0 ? "COMMIT" : "ROLLBACK", NULL, 0);
    tr_exec(db, "DETACH rs", NULL, 0);
  }
  sqlite3_free(sql);
  return rc;
}

int tr_ring_import(sqlite3 *db, const char *path, int rank, char *err, size_t len) {
  ring_img img;
  unsigned char *buf = NULL;
  if (load(path, &img, &buf, err, len) != 0)
    return -1;
  int rc = -1;
  if (img.hdr.rank != rank) {
    snprintf(err, len, "ring dump of rank %d in rank %d's file name", img.hdr.rank, rank);
    goto out;
  }
  char scratch[4200];
  int slot; /* a signal during the import removes it */
  if (tr_temp_create("dist-ring", scratch, sizeof scratch, &slot) != 0) {
    snprintf(err, len, "cannot create a scratch file in %s: %s", tr_tmpdir(), strerror(errno));
    goto out;
  }
  char maps[4200]; /* rank-<R>.maps beside rank-<R>.ring */
  size_t stem = strlen(path) > 5 ? strlen(path) - 5 : 0;
  snprintf(maps, sizeof maps, "%.*s.maps", (int)stem, path);
  rc = decode(&img, rank, scratch, err, len);
  if (rc == 0)
    rc = fold(db, &img, rank, scratch, maps, err, len);
  unlink(scratch);
  tr_temp_release(slot);
out:
  free(buf);
  return rc;
}
