/* distrun_args.c - distrun's command line, the SLURM variables it reads,
 * and --help.
 *
 * Precedence for every setting: the command line, then the environment
 * (MASTER_ADDR, MASTER_PORT, DIST_JOB_ID), then SLURM, then the default.
 * SLURM is read only when SLURM_JOB_ID is set; distrun is meant to run once
 * per node (srun --ntasks-per-node=1 distrun ...):
 *   SLURM_NNODES (or SLURM_JOB_NUM_NODES)  -> --nnodes
 *   SLURM_NODEID                            -> --node-rank
 *   SLURM_NTASKS_PER_NODE ("4" or "4(x2)")  -> --nproc-per-node, else
 *   SLURM_NTASKS / nnodes when it divides
 *   first host of SLURM_STEP_NODELIST, SLURM_JOB_NODELIST or SLURM_NODELIST
 *   (SLURM_NODEID 0 runs there), else SLURM_LAUNCH_NODE_IPADDR
 *                                           -> --master-addr
 *   the SLURM port (dist__run_slurm_port)   -> --master-port with several
 *                                              nodes (two jobs, or two steps
 *                                              of one job, sharing node 0
 *                                              differ); one node: a free port
 *   slurm-<SLURM_JOB_ID>[.<SLURM_STEP_ID>]  -> the job id */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "distrun.h"

static const char usage_text[] =
    "usage: distrun [options] [--] program [args...]\n"
    "\n"
    "Starts the ranks of a libdist job on this node, hosts the job's store,\n"
    "and supervises the ranks: when one fails, the others are ended and the\n"
    "exit status says why.\n"
    "\n"
    "  -n, --nproc-per-node N   ranks on this node (default 1, or SLURM's)\n"
    "      --nnodes M           nodes in the job (default 1)\n"
    "      --node-rank K        this node's index, 0..M-1 (node 0 hosts the store)\n"
    "      --master-addr A      host name or IPv4/IPv6 address of node 0\n"
    "      --master-port P      port of the job's store on node 0 (default 29500\n"
    "                           with several nodes; a free port with one)\n"
    "      --standalone         one node: store on 127.0.0.1, a free port\n"
    "      --log-dir DIR        write each rank's output to DIR/rank-R.out and\n"
    "                           DIR/rank-R.err instead of the terminal\n"
    "      --tee                with --log-dir, show the output on the terminal too\n"
    "      --no-prefix          do not prefix output lines with \"[R] \"\n"
    "      --trace-out FILE     merge the ranks' traces into FILE at the end\n"
    "                           (default ./trace.db; DIST_TRACE=0: no trace)\n"
    "      --grace-period S     seconds between SIGTERM and SIGKILL when ending\n"
    "                           ranks (default 5)\n"
    "      --join-timeout S     seconds to reach node 0's store (default: DIST_TIMEOUT\n"
    "                           or 600)\n"
    "      --timeout S          the job's group timeout (sets DIST_TIMEOUT for the\n"
    "                           ranks; stall reports come at a quarter of it)\n"
    "      --local-rank-arg     pass --local-rank=N to the program after its name,\n"
    "                           as torch.distributed.launch without --use-env\n"
    "  -h, --help               this text\n"
    "  -V, --version            libdist's version\n"
    "\n"
    "Every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
    "MASTER_PORT, DIST_JOB_ID, DIST_TOKEN (a fresh secret, in the environment\n"
    "only), DIST_USE_AGENT_STORE=1, DIST_NODE_RANK, DIST_NNODES, DIST_LAUNCHER.\n"
    "Several nodes need the same DIST_TOKEN exported on each (or\n"
    "DIST_ALLOW_NO_TOKEN=1). Under SLURM (one distrun per node), SLURM_NNODES,\n"
    "SLURM_NODEID, SLURM_NTASKS_PER_NODE, SLURM_JOB_NODELIST and SLURM_JOB_ID\n"
    "fill in what the command line leaves out; node 0's store then listens on\n"
    "port 20000 + (SLURM_JOB_ID x 131 + SLURM_STEP_ID) mod 10000 unless\n"
    "--master-port or MASTER_PORT says otherwise.\n"
    "\n"
    "Exit status:\n"
    "   0  every rank succeeded\n"
    "   1  anything else (distrun interrupted by a signal, node 0 lost)\n"
    "   2  usage error\n"
    "  10  desync: a rank met DIST_E_DESYNC (the checking layer at DIST_DEBUG=DETAIL,\n"
    "      or a backend's own size checks at any level)\n"
    "  11  hang or timeout: a rank posted a timeout diagnosis\n"
    "  12  a rank died or failed otherwise (non-zero exit or signal; the first\n"
    "      one is named; another posted cause, e.g. a NaN check, is printed last)\n"
    "  13  launch failure (program not found, fork failure, the store cannot\n"
    "      start or be reached)\n"
    "When a rank fails, distrun waits up to 1 s for the cause a rank posted in\n"
    "the job's store (key dist/cause) and prints that report last, once.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "distrun: %s\nTry 'distrun --help'.\n", msg);
  return DRUN_EXIT_USAGE;
}

/* An integer in [lo, hi] from text; false when it is not one. */
static bool parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

static int int_option(const char *name, const char *arg, int64_t lo, int64_t hi,
                      int64_t *out) {
  if (!parse_int(arg, lo, hi, out))
    return usage_error("%s needs an integer in [%" PRId64 ", %" PRId64 "], got '%s'",
                       name, lo, hi, arg);
  return -1;
}

static int seconds_option(const char *name, const char *arg, int64_t *ms) {
  char *end;
  errno = 0;
  double s = strtod(arg, &end);
  if (errno || end == arg || *end || !(s >= 0) || s > 86400.0 * 365)
    return usage_error("%s needs a number of seconds, got '%s'", name, arg);
  *ms = (int64_t)(s * 1000.0 + 0.5);
  return -1;
}

int dist__run_slurm_first_host(const char *list, char *out, size_t len) {
  size_t i = 0, o = 0;
  while (list[i] && list[i] != ',' && list[i] != '[' && o + 1 < len)
    out[o++] = list[i++];
  if (list[i] == '[') { /* "node[01-04,07]": the first number of the range */
    i++;
    while (isalnum((unsigned char)list[i]) && o + 1 < len)
      out[o++] = list[i++];
  }
  out[o] = '\0';
  return o ? 0 : -1;
}

/* The leading integer of "4(x2)" or "4,2". */
static bool leading_int(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v <= 0)
    return false;
  *out = v;
  return true;
}

typedef struct given {
  bool nproc, nnodes, node_rank, addr, port;
  bool port_cli; /* on the command line (a one-node job ignores the others) */
} given;

/* Nodes, this node's index and ranks per node from SLURM. */
static void read_slurm_shape(drun_cfg *c, given *g) {
  const char *v;
  int64_t x;
  if (!g->nnodes && (((v = getenv("SLURM_NNODES")) && leading_int(v, &x)) ||
                     ((v = getenv("SLURM_JOB_NUM_NODES")) && leading_int(v, &x)))) {
    c->nnodes = (int)x;
    g->nnodes = true;
  }
  if (!g->node_rank && (v = getenv("SLURM_NODEID")) && parse_int(v, 0, INT32_MAX, &x)) {
    c->node_rank = (int)x;
    g->node_rank = true;
  }
  if (!g->nproc && (v = getenv("SLURM_NTASKS_PER_NODE")) && leading_int(v, &x)) {
    c->nproc = (int)x;
    g->nproc = true;
  } else if (!g->nproc && (v = getenv("SLURM_NTASKS")) && leading_int(v, &x) &&
             x % c->nnodes == 0) {
    c->nproc = (int)(x / c->nnodes);
    g->nproc = true;
  }
}

/* Node 0's store port for step `step` of SLURM job `job`: deterministic, so
 * every node computes it alike, and different for the steps of one job (up
 * to 131 of them) that may share node 0. */
uint16_t dist__run_slurm_port(int64_t job, int64_t step) {
  return (uint16_t)(20000 + (uint64_t)((job % 10000) * 131 + step % 131) % 10000);
}

/* Fills what the command line left out from SLURM (see the file comment). */
static void read_slurm(drun_cfg *c, given *g) {
  const char *job = getenv("SLURM_JOB_ID");
  if (!job || !*job)
    return;
  const char *v;
  int64_t x;
  read_slurm_shape(c, g);
  const char *lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
  for (size_t i = 0; !g->addr && i < 3; i++)
    if ((v = getenv(lists[i])) && *v &&
        dist__run_slurm_first_host(v, c->master_addr, sizeof c->master_addr) == 0)
      g->addr = true;
  if (!g->addr && (v = getenv("SLURM_LAUNCH_NODE_IPADDR")) && *v) {
    snprintf(c->master_addr, sizeof c->master_addr, "%s", v);
    g->addr = true;
  }
  if (!g->port && parse_int(job, 0, INT64_MAX, &x)) {
    const char *step = getenv("SLURM_STEP_ID");
    int64_t s = 0;
    if (!step || !parse_int(step, 0, INT32_MAX, &s))
      s = 0;
    c->master_port = dist__run_slurm_port(x, s);
    g->port = true;
  }
  if (!c->job_id[0]) {
    const char *step = getenv("SLURM_STEP_ID");
    bool numeric_step = step && parse_int(step, 0, INT32_MAX, &x);
    snprintf(c->job_id, sizeof c->job_id, "slurm-%s%s%s", job, numeric_step ? "." : "",
             numeric_step ? step : "");
    if (!dist__rendezvous_job_id_ok(c->job_id))
      c->job_id[0] = '\0';
  }
  c->slurm_note = "SLURM";
}

/* MASTER_ADDR / MASTER_PORT / DIST_JOB_ID from distrun's own environment. */
static int read_env(drun_cfg *c, given *g) {
  const char *v;
  int64_t x;
  if (!g->addr && (v = getenv(DIST_ENV_MASTER_ADDR)) && *v) {
    snprintf(c->master_addr, sizeof c->master_addr, "%s", v);
    g->addr = true;
  }
  if (!g->port && (v = getenv(DIST_ENV_MASTER_PORT)) && *v) {
    if (!parse_int(v, 1, 65535, &x))
      return usage_error("MASTER_PORT='%s' is not a port number", v);
    c->master_port = (uint16_t)x;
    g->port = true;
  }
  if ((v = getenv(DIST_ENV_JOB_ID)) && *v) {
    if (!dist__rendezvous_job_id_ok(v))
      return usage_error("DIST_JOB_ID='%s' is not a job id (1 to %d of A-Z a-z 0-9 . _ -)",
                         v, DIST_JOB_ID_MAX);
    snprintf(c->job_id, sizeof c->job_id, "%s", v);
  }
  return -1;
}

static const struct option long_opts[] = {
    {"nproc-per-node", required_argument, NULL, 'n'},
    {"nproc_per_node", required_argument, NULL, 'n'},
    {"nnodes", required_argument, NULL, 'N'},
    {"node-rank", required_argument, NULL, 'k'},
    {"node_rank", required_argument, NULL, 'k'},
    {"master-addr", required_argument, NULL, 'a'},
    {"master_addr", required_argument, NULL, 'a'},
    {"master-port", required_argument, NULL, 'p'},
    {"master_port", required_argument, NULL, 'p'},
    {"standalone", no_argument, NULL, 's'},
    {"log-dir", required_argument, NULL, 'l'},
    {"tee", no_argument, NULL, 't'},
    {"no-prefix", no_argument, NULL, 'P'},
    {"trace-out", required_argument, NULL, 'T'},
    {"grace-period", required_argument, NULL, 'g'},
    {"join-timeout", required_argument, NULL, 'j'},
    {"timeout", required_argument, NULL, 'o'},
    {"local-rank-arg", no_argument, NULL, 'L'},
    {"local_rank_arg", no_argument, NULL, 'L'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* One option; returns -1 to go on, or an exit status. */
static int take_option(int ch, const char *arg, const char *argv0, drun_cfg *c, given *g) {
  int64_t x = 0;
  int rc = -1;
  switch (ch) {
  case 'n':
    if ((rc = int_option("--nproc-per-node", arg, 1, DRUN_MAX_WORLD, &x)) < 0)
      c->nproc = (int)x, g->nproc = true;
    return rc;
  case 'N':
    if (strchr(arg, ':'))
      return usage_error("--nnodes %s: elastic ranges (MIN:MAX) are not supported", arg);
    if ((rc = int_option("--nnodes", arg, 1, DRUN_MAX_WORLD, &x)) < 0)
      c->nnodes = (int)x, g->nnodes = true;
    return rc;
  case 'k':
    if ((rc = int_option("--node-rank", arg, 0, DRUN_MAX_WORLD, &x)) < 0)
      c->node_rank = (int)x, g->node_rank = true;
    return rc;
  case 'a':
    if (!*arg || strlen(arg) >= sizeof c->master_addr)
      return usage_error("--master-addr needs a host name or address");
    snprintf(c->master_addr, sizeof c->master_addr, "%s", arg);
    g->addr = true;
    return -1;
  case 'p':
    if ((rc = int_option("--master-port", arg, 1, 65535, &x)) < 0)
      c->master_port = (uint16_t)x, g->port = g->port_cli = true;
    return rc;
  case 's': c->standalone = true; return -1;
  case 'l': c->log_dir = arg; return -1;
  case 't': c->tee = true; return -1;
  case 'P': c->prefix = false; return -1;
  case 'T':
    if (!*arg)
      return usage_error("--trace-out needs a file name");
    c->trace_out = arg;
    return -1;
  case 'L': c->local_rank_arg = true; return -1;
  case 'g': return seconds_option("--grace-period", arg, &c->grace_ms);
  case 'j': return seconds_option("--join-timeout", arg, &c->join_timeout_ms);
  case 'o':
    /* The ranks read DIST_TIMEOUT (and inherit distrun's environment). */
    if ((rc = int_option("--timeout", arg, 1, INT32_MAX, &x)) < 0)
      setenv("DIST_TIMEOUT", arg, 1);
    return rc;
  case 'h': fputs(usage_text, stdout); return DRUN_EXIT_OK;
  case 'V': printf("distrun (libdist) %s\n", dist_version()); return DRUN_EXIT_OK;
  default:
    /* getopt printed what was wrong ("unrecognized option '--x'"). */
    fprintf(stderr, "Try '%s --help'.\n", argv0);
    return DRUN_EXIT_USAGE;
  }
}

static int check_cfg(drun_cfg *c, const given *g) {
  if (c->tee && !c->log_dir)
    return usage_error("--tee shows on the terminal what goes to the --log-dir files; "
                       "without --log-dir the output is on the terminal already");
  if (c->standalone && c->nnodes > 1)
    return usage_error("--standalone runs one node, but --nnodes is %d", c->nnodes);
  if (c->node_rank >= c->nnodes)
    return usage_error("--node-rank %d is not below --nnodes %d", c->node_rank, c->nnodes);
  if ((int64_t)c->nproc * c->nnodes > DRUN_MAX_WORLD)
    return usage_error("%d nodes of %d ranks is more than %d ranks", c->nnodes, c->nproc,
                       DRUN_MAX_WORLD);
  if (c->nnodes == 1) {
    /* One node: nobody else needs to find the store. */
    snprintf(c->master_addr, sizeof c->master_addr, "127.0.0.1");
    if (!g->port_cli || c->standalone)
      c->master_port = 0;
    return -1;
  }
  if (!g->addr)
    return usage_error("--nnodes %d needs --master-addr (node 0's host name or address)",
                       c->nnodes);
  if (!g->port)
    c->master_port = 29500;
  return -1;
}

int dist__run_parse_args(int argc, char **argv, drun_cfg *c) {
  memset(c, 0, sizeof *c);
  c->nproc = 1;
  c->nnodes = 1;
  c->prefix = true;
  c->grace_ms = 5000;
  c->join_timeout_ms = -1;
  given g = {0};
  int ch, rc;
  opterr = 1;
  /* '+': stop at the program, so its own options are left alone. */
  while ((ch = getopt_long(argc, argv, "+n:hV", long_opts, NULL)) != -1)
    if ((rc = take_option(ch, optarg, argv[0], c, &g)) >= 0)
      return rc;
  if (optind >= argc)
    return usage_error("no program to run");
  c->prog_argv = argv + optind;
  if ((rc = read_env(c, &g)) >= 0)
    return rc;
  read_slurm(c, &g);
  if (c->join_timeout_ms < 0)
    c->join_timeout_ms = dist__default_timeout_ms();
  return check_cfg(c, &g);
}
