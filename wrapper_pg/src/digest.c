/* digest.c - the check's cost does not grow with the group.
 *
 * DESIGN. Each rank reduces a fixed-size digest of its record (wpg_fp)
 * with the others, in one all_reduce (MIN over int64) on the helper group:
 * a hash of every compared field, the call site and the sequence number,
 * each next to its complement, so min(v) and ~min(~v) = max(v) say whether
 * every member had the same value. When the hashes agree (and the call is
 * no all_to_all, whose per-rank sizes must cancel out as a sum) the round
 * is agreed: every rank holds the same reduction and decides the same,
 * having received WPG_DIGEST_N int64s, whatever the group's size. When
 * they differ, every member sees it, publishes its whole record (with its
 * record of the round before and the call sites it has seen agree) in the
 * job's store under a key all compute from the same reduction, and reads
 * the others': the report is then written from every record, exactly as
 * when the records themselves were gathered. Not over the helper: an
 * asynchronous check runs on the group's checking thread while the issuing
 * side may already have posted later digests there (exchange.c's details
 * meet in the store for the same reason). The call site takes no part in
 * the comparison (it is only carried, and compared min against max to know
 * whether the others' equal this rank's). */
#include <stdlib.h>
#include <string.h>

#include "wpg_int.h"

enum { D_H, D_NH, D_SITE, D_NSITE, D_SEQ, D_NSEQ };

/* What a member publishes when the digests differ. */
typedef struct full_rec {
  wpg_fp fp;
  wpg_fp prev;          /* its record of the last agreed round */
  int32_t have_prev;
  int32_t n_sites;
  uint64_t sites[32];   /* call sites it has seen agree (its own list) */
} full_rec;

static _Atomic uint64_t rx_bytes;

uint64_t dist__wpg_rx_bytes(void) { return atomic_load(&rx_bytes); }
void wpg_rx_add(uint64_t n) { atomic_fetch_add_explicit(&rx_bytes, n, memory_order_relaxed); }

static uint64_t site_of(const wpg_fp *fp) {
  return (uint64_t)fp->module << 48 ^ fp->caller_off;
}

void wpg_digest_make(const wpg_fp *fp, int64_t d[WPG_DIGEST_N]) {
  uint64_t h = wpg_roll(fp->version, fp->kind);
  h = wpg_roll(h, fp->count);
  h = wpg_roll(h, fp->dtype_h);
  h = wpg_roll(h, fp->numel_h);
  h = wpg_roll(h, fp->n_tensors);
  h = wpg_roll(h, fp->shape_h);
  h = wpg_roll(h, fp->dev_h);
  h = wpg_roll(h, (uint64_t)fp->redop << 8 | fp->premul);
  h = wpg_roll(h, fp->scalar);
  h = wpg_roll(h, (uint64_t)(uint32_t)fp->root);
  h = wpg_roll(h, (uint64_t)(uint32_t)fp->tag);
  h = wpg_roll(h, fp->hist);
  d[D_H] = (int64_t)h;
  d[D_NH] = ~(int64_t)h;
  d[D_SITE] = (int64_t)site_of(fp);
  d[D_NSITE] = ~d[D_SITE];
  d[D_SEQ] = (int64_t)fp->seq;
  d[D_NSEQ] = ~d[D_SEQ];
}

static bool same(const int64_t *red, int i) {
  return red[i] == ~red[i + 1];
}

static bool is_a2a(int kind) {
  return kind == DIST_OP_ALL_TO_ALL || kind == DIST_OP_ALL_TO_ALL_SINGLE;
}

static void note_site(wpg *w, uint64_t key) {
  int cap = (int)(sizeof w->sites_seen / sizeof w->sites_seen[0]);
  if (!key)
    return;
  for (int i = 0; i < w->n_sites_seen; i++)
    if (w->sites_seen[i] == key)
      return;
  w->sites_seen[w->n_sites_seen % cap] = key; /* the oldest gives way */
  w->n_sites_seen += w->n_sites_seen < cap;
}

/* An agreed round: this rank's record is the round's, and the others' are
 * known as far as their sites and numbers were the same. */
static void agreed(wpg *w, const wpg_fp *me, bool site_same, bool seq_same) {
  w->last_mine = *me;
  w->last_site_same = site_same;
  w->last_seq_same = seq_same;
  w->have_prev = true;
  note_site(w, site_of(me));
}

bool wpg_last_of(const wpg *w, int r, wpg_fp *out) {
  if (!w->have_prev)
    return false;
  *out = w->last_mine;
  if (r != w->rank && !w->last_site_same)
    out->caller_off = 0, out->module = 0, /* its own, unknown here */
        out->nm_kind = 0, out->nm_off = 0, out->nm_module = 0;
  return true;
}

/* The last member to have read the round's records deletes them: each
 * all_to_all exchanges them (its digest cannot compare uneven splits), and
 * they used to stay in distrun's store for the job's life. A member that
 * never reads (gone, or timed out) leaves the round's keys, as before. */
static void forget_records(wpg *w, dist_store *st, const char *const *kp, uint64_t h) {
  char done[200];
  snprintf(done, sizeof done, "wpg/%s/rec/%d/%016llx/read", w->info->name, wpg_generation(),
           (unsigned long long)h);
  int64_t readers = 0;
  if (dist_store_add(st, done, 1, &readers) != DIST_OK || readers != w->size)
    return;
  for (int r = 0; r < w->size; r++)
    dist_store_delete_key(st, kp[r], NULL);
  dist_store_delete_key(st, done, NULL);
}

/* Every member's whole record into w->all (and their records of the round
 * before into w->prev), through the job's store. */
static int exchange_records(wpg *w, const wpg_fp *me, const int64_t *red, full_rec *got) {
  int n = w->size;
  uint64_t h = 0;
  for (int i = 0; i < WPG_DIGEST_N; i++)
    h = wpg_roll(h, (uint64_t)red[i]);
  full_rec mine = {.fp = *me, .prev = w->last_mine, .have_prev = w->have_prev,
                   .n_sites = w->n_sites_seen};
  memcpy(mine.sites, w->sites_seen, sizeof mine.sites);
  dist_store *st = NULL;
  char (*keys)[160] = calloc((size_t)n, sizeof *keys);
  const char **kp = calloc((size_t)n, sizeof *kp);
  int rc = keys && kp ? DIST_OK : DIST_E_NOMEM;
  if (rc == DIST_OK && (!dist_get_default_store() ||
                        dist_store_clone(dist_get_default_store(), &st) != DIST_OK))
    rc = DIST_E_STORE;
  for (int r = 0; rc == DIST_OK && r < n; r++) {
    snprintf(keys[r], sizeof keys[r], "wpg/%s/rec/%d/%016llx/%d", w->info->name,
             wpg_generation(), (unsigned long long)h, r);
    kp[r] = keys[r];
  }
  if (rc == DIST_OK)
    rc = dist_store_set(st, kp[w->rank], &mine, sizeof mine);
  if (rc == DIST_OK) /* every member reached this point: they all publish */
    dist_store_wait(st, kp, (size_t)n, wpg_grace_ms(w->info->timeout_ms));
  for (int r = 0; rc == DIST_OK && r < n; r++) {
    bool there = false;
    void *v = NULL;
    size_t len = 0;
    if (r == w->rank) {
      got[r] = mine;
    } else if (dist_store_check(st, &kp[r], 1, &there) == DIST_OK && there &&
               dist_store_get(st, kp[r], &v, &len) == DIST_OK && len == sizeof *got) {
      memcpy(&got[r], v, sizeof *got);
      wpg_rx_add(len);
    } else { /* not heard from: its kind alone, from no record */
      got[r] = mine;
      got[r].fp.kind = me->kind;
      got[r].fp.caller_off = 0;
      got[r].fp.module = 0;
      got[r].fp.nm_kind = 0;
    }
    dist_free(v);
  }
  if (rc == DIST_OK)
    forget_records(w, st, kp, h);
  dist_store_destroy(st);
  free(keys), free(kp);
  return rc;
}

int wpg_decide(wpg *w, const dist_coll *c, const wpg_fp *me, const int64_t *red,
               bool caller_thread) {
  if (same(red, D_H) && !is_a2a(me->kind)) {
    agreed(w, me, same(red, D_SITE), same(red, D_SEQ));
    return DIST_OK;
  }
  int n = w->size;
  full_rec *got = calloc((size_t)n, sizeof *got);
  uint64_t *seen = calloc((size_t)n * 32 + 1, sizeof *seen);
  if (!got || !seen) {
    free(got), free(seen);
    return wpg_set_error(w, DIST_E_NOMEM, "group %d: out of memory comparing records",
                         w->info->group_id);
  }
  int rc = exchange_records(w, me, red, got);
  if (rc != DIST_OK) { /* no store to meet in: this rank's record alone */
    free(got), free(seen);
    return wpg_set_error(w, DIST_E_DESYNC, "desync in group %d at %s #%llu: ranks disagree "
                         "(the records could not be compared: no store)", w->info->group_id,
                         dist_op_name(wpg_kind(c)), (unsigned long long)c->seq);
  }
  int k = 0;
  for (int i = 0; i < n; i++) {
    w->all[i] = got[i].fp;
    w->prev[i] = got[i].prev;
    for (int j = 0; j < got[i].n_sites && j < 32; j++) {
      bool dup = false;
      for (int q = 0; q < k && !dup; q++)
        dup = seen[q] == got[i].sites[j];
      if (!dup)
        seen[k++] = got[i].sites[j];
    }
  }
  free(got);
  if (wpg_fp_agree(w->all, n)) { /* all_to_all whose sizes cancel out */
    bool site_same = true, seq_same = true;
    for (int i = 1; i < n; i++) {
      site_same &= site_of(&w->all[i]) == site_of(&w->all[0]);
      seq_same &= w->all[i].seq == w->all[0].seq;
    }
    free(seen);
    agreed(w, me, site_same, seq_same);
    return DIST_OK;
  }
  w->seen_all = seen;
  w->n_seen_all = k;
  rc = wpg_report_desync(w, c, w->all, caller_thread);
  w->seen_all = NULL;
  w->n_seen_all = 0;
  free(seen);
  return rc;
}
