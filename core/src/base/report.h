/* report.h - building failure reports in the one format of status.h.
 *
 * Engines write a body (dist__report_disagree for ranks that disagree);
 * pg.c adds the header (dist__report_head). */
#ifndef DIST_REPORT_H
#define DIST_REPORT_H

#include "dist_int.h"

/* What a header names of the group. */
typedef struct dist__report_group {
  int id;               /* user-visible id (-1 internal) */
  const char *name;     /* shown when desc is empty */
  const char *desc;
  int size;
} dist__report_group;

/* One rank's side of an operation, in dist_coll_describe's vocabulary. */
typedef struct dist__rval {
  int kind;             /* dist_op_kind */
  uint64_t seq;         /* shown when nonzero (point-to-point peers) */
  int dtype;            /* -1: none */
  int64_t count;        /* elements; with dtype */
  int redop;            /* dist_redop_kind, -1: none */
  double scalar;        /* PREMUL_SUM's */
  int root;             /* global rank, -1: none */
  const char *dir;      /* "to" / "from" peer, or NULL */
  int peer;             /* global rank, with dir */
  bool list;            /* a list collective's list is what the line shows
                           (its dtype and count are then the entry's): */
  int entry;            /* with list, its entry (a group rank's index), or
                           -1: the list's entries differ in size */
  int part;             /* a blob's piece (kind is the piece's): the user's
                           call's dist_op_kind + 1, shown first ("BROADCAST_BYTES
                           (run as BROADCAST int64[1] root 2)"); 0 none. A
                           list entry's piece shows as its call, with list */
} dist__rval;

/* One line of a disagreement. */
typedef struct dist__rside {
  int global_rank;
  int group_rank;       /* shown when it differs from global_rank */
  bool self;            /* the calling rank (not shown: reports read the
                           same on every rank) */
  char value[200];      /* dist__report_value */
} dist__rside;

/* "desync", "timeout", ... for status rc. */
const char *dist__report_what(int rc);
/* Whether msg already starts with a report header. */
bool dist__report_has_head(const char *msg);
/* out = header + body; body's own leading "<OP> #<seq>: " is dropped.
 * body may alias out. seq 0: "(not started)". */
void dist__report_head(char *out, size_t len, int rc, const dist__report_group *g,
                       dist_op_kind kind, uint64_t seq, const char *body);
/* "ALL_REDUCE float32[4] op=SUM (16 bytes)"; with list, "ALL_GATHER, output
 * tensors[1] float32[32] (128 bytes)" or, entry -1, "ALL_GATHER float32,
 * output tensors of different sizes"; with part, "BROADCAST_BYTES (run as
 * BROADCAST int64[1] root 2) (8 bytes)", as the checking layer words it. */
char *dist__report_value(const dist__rval *v, char *buf, size_t len);
/* The list of a list collective whose entries may differ in size between
 * ranks ("output tensors" of ALL_GATHER, "input tensors" of
 * REDUCE_SCATTER: api/uneven.c), NULL for other kinds. */
const char *dist__report_list_name(int kind);
/* The field of a disagreement on that list: "size of output tensors[1]",
 * or for entry -1 (one rank's entries differ in size, so it ran the call
 * in another form than a rank whose entries are all alike) "size of an
 * output tensor". */
const char *dist__report_list_field(int kind, int entry, char *buf, size_t len);
/* Appends "ranks disagree on the <field>" and the two ranks' lines (ascending
 * global rank, "<- <field> differs" on the later one). */
/* The same when the odd side is known (the others agree with usual): the
 * marker goes on odd's line, the lines still in ascending rank order. */
void dist__report_disagree_odd(char *buf, size_t len, size_t *off, const char *field,
                               const dist__rside *usual, const dist__rside *odd);
void dist__report_disagree(char *buf, size_t len, size_t *off, const char *field,
                           const dist__rside *a, const dist__rside *b);
/* The same with the marker on both lines: a pair (a send and its receive)
 * where neither side is known to be the odd one, so both are blamed. */
void dist__report_disagree_both(char *buf, size_t len, size_t *off, const char *field,
                                const dist__rside *a, const dist__rside *b);

#endif
