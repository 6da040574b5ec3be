/* diag_int.h - the parts of the diagnosis (diag.c): the desync scan
 * (diag_desync.c) and the wait-for analysis (diag_hang.c). Each fills d
 * when it finds something and leaves d->kind VW_DIAG_NONE otherwise. */
#ifndef DIST_VW_DIAG_INT_H
#define DIST_VW_DIAG_INT_H

#include "vw.h"

int vw_diag_desync(vw_model *m, bool deep, vw_diag *d);
int vw_diag_hang(vw_model *m, vw_diag *d);
/* diag_report.c: the job's own stored report, and deaths as causes. */
int vw_diag_stored_report(vw_model *m, vw_diag *d);
bool vw_diag_report_wins(const vw_diag *d);
void vw_diag_use_report(vw_model *m, vw_diag *d);
int vw_diag_deaths(vw_model *m, vw_diag *d);
/* A rank that exited with an async operation pending that a peer failed
 * in: it ended while its peers still needed it (diag_report.c). */
int vw_diag_left_pending(vw_model *m, vw_diag *d);
/* A hang whose one culprit exited with status 0: an early exit. */
int vw_diag_early_exit(vw_model *m, vw_diag *d);
/* Every rank but one finished: that one called on alone (diag_report.c). */
void vw_diag_odd_one_out(vw_model *m, vw_diag *d);
/* diag_verdict.c: the verdict row, when distrun wrote one, goes first. */
int vw_diag_verdict(vw_model *m, vw_diag *d);
/* Whether op is point-to-point (its rows differ across ranks by design). */
bool vw_op_is_p2p(const char *op);
/* Whether ranks must agree on op's input shape and element count. */
bool vw_op_same_shape(const char *op);
/* Fingerprint fields on which a and b differ, comma-separated into buf;
 * returns how many. */
int vw_fp_diff(const vw_op *a, const vw_op *b, char *buf, size_t len);
/* The majority row of one collective's rows: the one most others have no
 * difference with (ties: against the class with more suspect rows, when
 * suspect (may be NULL) says which (diag_desync.c's suspect_rows: a call
 * that changed, a new call site, a skipped call); then a row whose fields
 * are known; then the first). */
int vw_fp_majority(const vw_op *ops, int n, const bool *suspect);

#endif
