/* trace_rec.h - the flight recorder's record format, shared by the ring
 * (runtime), the writer, and the merge (which imports a ring dumped at a
 * crash into a `.ring` side file).
 *
 * The ring is an array of 64-byte slots. A record takes one slot, plus
 * continuation slots for what does not fit: the tensor counts and shape of
 * an operation's first record, or a text payload (messages, a group's
 * names and members). Every slot opens with a stamp: ring index + 1 once
 * its contents are complete, so a reader knows which slots it can trust
 * (the ring keeps the newest records and overwrites the oldest). */
#ifndef DIST_TRACE_REC_H
#define DIST_TRACE_REC_H

#include <stdint.h>

#define TR_SLOT 64
#define TR_WORDS (TR_SLOT / 8)
#define TR_MAX_DIMS 4 /* dims kept of the first tensor's shape */
#define TR_TEXT_PER_SLOT (TR_SLOT - 8)
#define TR_MAX_SLOTS 64 /* a record's text payload is cut at ~3.5 KiB */

/* Record kinds beyond dist_event_kind (which stays below 64). */
enum {
  TR_KIND_CLOCK = 100, /* seq = round trip ns, aux = offset ns */
  TR_KIND_CRASH = 101, /* status = signal number */
  TR_KIND_STATS = 102, /* one row of a DIST_EV_STATS block: op, seq = count,
                          caller = bytes, aux = p50 ns, root = straggler;
                          a tr_stats slot follows */
  TR_KIND_OTLP_FAILED = 103, /* live export's first failure in a row:
                                status = operations dropped so far, text */
};

/* The second slot of a TR_KIND_STATS record. */
typedef struct tr_stats {
  uint64_t stamp;
  int64_t p99_ns;
  int64_t lateness_ns;
  int64_t pad[5];
} tr_stats;

#define TR_F_ASYNC 1u
#define TR_F_SHAPE 2u /* a shape slot follows the head */

/* The head slot of every record. */
typedef struct tr_head {
  uint64_t stamp;
  uint8_t kind;   /* dist_event_kind or TR_KIND_* */
  uint8_t op;     /* dist_op_kind; 0xff none */
  uint8_t dtype;  /* dist_dtype; 0xff none */
  uint8_t redop;  /* dist_redop; 0xff none */
  uint8_t nslots; /* 1 + continuation slots */
  uint8_t ndim;
  uint8_t flags;  /* TR_F_* */
  uint8_t pad;
  int32_t group_id;
  int32_t status;
  uint64_t seq;    /* operations: per group and kind (collectives and
                      point-to-point number apart; the op tells which) */
  int64_t t_ns;
  int32_t root;   /* global rank (root/src/dst/peer, lost peer); -1 none */
  int32_t tag;
  uint64_t caller; /* return address of the public call */
  int64_t aux;     /* TR_KIND_CLOCK: the offset ns; an operation's records:
                      its pair number (dist_coll.pair_seq), 0 none */
} tr_head;

/* The second slot of an operation's first record (TR_F_SHAPE). */
typedef struct tr_shape {
  uint64_t stamp;
  int64_t numel_in, numel_out;
  uint16_t n_inputs, n_outputs;
  uint32_t pad;
  int64_t shape[TR_MAX_DIMS];
} tr_shape;

/* Text slots: stamp + 56 bytes; the slots after the head (and the shape
 * slot) hold one text, NUL-terminated or filling them. A group's text is
 * its fields separated by \x1f: name, description, backend, members (JSON
 * array of global ranks), timeout ms. */
typedef struct tr_text {
  uint64_t stamp;
  char text[TR_TEXT_PER_SLOT];
} tr_text;

_Static_assert(sizeof(tr_head) == TR_SLOT, "tr_head is one slot");
_Static_assert(sizeof(tr_shape) == TR_SLOT, "tr_shape is one slot");
_Static_assert(sizeof(tr_text) == TR_SLOT, "tr_text is one slot");
_Static_assert(sizeof(tr_stats) == TR_SLOT, "tr_stats is one slot");

/* The header of a `.ring` side file: then `slots` slots of the ring in
 * index order modulo slots (the raw array). */
#define TR_RING_MAGIC "DISTRNG1"
typedef struct tr_ring_file {
  char magic[8];
  uint32_t version;     /* 1 */
  uint32_t slot_size;   /* TR_SLOT */
  uint64_t slots;       /* power of two */
  uint64_t head;        /* next index to be claimed */
  int32_t rank;
  int32_t signal;       /* the signal that killed the process */
  int64_t t_ns;         /* when the dump was taken (rank clock) */
  char job_id[64];
} tr_ring_file;

#endif
