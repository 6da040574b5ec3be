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
#include <strings.h>
#include <unistd.h>

#include "distrun.h"

static const char usage_text[] =
    "usage: distrun [options] [--] program [args...]\n"
    "\n"
    "Starts the ranks of a libdist job on this node, hosts the job's store,\n"
    "and supervises the ranks: when one fails, the others are ended and the\n"
    "exit status says why.\n"
    "\n"
    "  -n, --nproc-per-node N|auto|cpu|gpu\n"
    "                           ranks on this node (default 1, or SLURM's); gpu: the\n"
    "                           visible CUDA devices; cpu: the CPUs; auto: gpu, else cpu\n"
    "      --nnodes M|MIN:MAX   nodes in the job (default 1); MIN:MAX (c10d): each round\n"
    "                           waits for MIN nodes, admits up to MAX (last_call_timeout)\n"
    "      --node-rank K        this node's index, 0..M-1 (node 0 hosts the store)\n"
    "      --master-addr A      host name or IPv4/IPv6 address of node 0\n"
    "      --master-port P      port of the job's store on node 0 (default 29500\n"
    "                           with several nodes; a free port with one)\n"
    "      --rdzv-endpoint H[:P]  the same as --master-addr H --master-port P\n"
    "                           (P default 29400, as torchrun's)\n"
    "      --rdzv-backend c10d|static  both: node 0 hosts the job's store on the\n"
    "                           endpoint, with the job's token (never open)\n"
    "      --rdzv-id ID         the job's id (DIST_JOB_ID, TORCHELASTIC_RUN_ID)\n"
    "      --rdzv-conf K=V,...  join_timeout (= --join-timeout: MIN nodes within it),\n"
    "                           last_call_timeout (30 s: more nodes, up to MAX),\n"
    "                           keep_alive_interval (5 s), keep_alive_max_attempt (3:\n"
    "                           a node silent that long has left), is_host=true|false;\n"
    "                           read_timeout, close_timeout checked\n"
    "      --local-addr A       the address of this node that its ranks give the others\n"
    "      --standalone         one node: store on 127.0.0.1, a free port\n"
    "      --max-restarts N     restart every rank (every node's) up to N times when one\n"
    "                           fails; each attempt's verdict is printed and its trace\n"
    "                           kept (trace.attempt-K.db); the status is the last's\n"
    "      --monitor-interval S accepted (torchrun's polling period); distrun hears a\n"
    "                           rank's end at once\n"
    "      --log-dir DIR        write each rank's output to DIR/rank-R.out and\n"
    "                           DIR/rank-R.err instead of the terminal\n"
    "  -r, --redirects 0|1|2|3  with --log-dir: which streams go to the files (none,\n"
    "                           stdout, stderr, both; default both)\n"
    "  -t, --tee [0|1|2|3]      with --log-dir, show those streams on the terminal too\n"
    "                           (no value: both)\n"
    "      --local-ranks-filter R,...  show only these local ranks on the terminal\n"
    "      --no-prefix          do not prefix output lines with \"[R] \"\n"
    "      --role NAME          ROLE_NAME for the ranks (default \"default\")\n"
    "  -m, --module             run the program line as python3 -u -m MODULE ...\n"
    "      --no-python          exec the program line as it is (also a .py script)\n"
    "      --run-path, --start-method spawn|fork|forkserver, --use-env\n"
    "                           accepted: every rank is a fresh process either way\n"
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
    "only), DIST_USE_AGENT_STORE=1, DIST_NODE_RANK, DIST_NNODES, DIST_LAUNCHER,\n"
    "DIST_RESTART_COUNT, and torchrun's GROUP_RANK, ROLE_NAME, ROLE_RANK,\n"
    "ROLE_WORLD_SIZE, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,\n"
    "TORCHELASTIC_RUN_ID. A program ending in .py runs under python3 -u, as\n"
    "torchrun runs every script (--no-python: as it is). torchrun options distrun\n"
    "does not take (--logs-specs, --event-log-handler, --numa-binding,\n"
    "--signals-to-handle, --virtual-local-rank) are refused with the reason.\n"
    "Several nodes need the same DIST_TOKEN exported on each (or\n"
    "DIST_ALLOW_NO_TOKEN=1). Under SLURM (one distrun per node), SLURM_NNODES,\n"
    "SLURM_NODEID, SLURM_NTASKS_PER_NODE, SLURM_JOB_NODELIST and SLURM_JOB_ID\n"
    "fill in what the command line leaves out; node 0's store then listens on\n"
    "port 20000 + (SLURM_JOB_ID x 131 + SLURM_STEP_ID) mod 10000 unless\n"
    "--master-port or MASTER_PORT says otherwise.\n"
    "\n"
    "Exit status (with --max-restarts: the last attempt's):\n"
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
  bool redirects; /* --redirects given */
} given;

/* Nodes, this node's index and ranks per node from SLURM. */
static void read_slurm_shape(drun_cfg *c, given *g) {
  const char *v;
  int64_t x;
  if (!g->nnodes && (((v = getenv("SLURM_NNODES")) && leading_int(v, &x)) ||
                     ((v = getenv("SLURM_JOB_NUM_NODES")) && leading_int(v, &x)))) {
    c->nnodes = c->nnodes_min = (int)x;
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

/* Long options; torchrun's spellings (hyphens or underscores) map to the
 * same letters (README, "distrun and torchrun"). */
enum {
  O_RDZV_BACKEND = 256, O_RDZV_ENDPOINT, O_RDZV_ID, O_RDZV_CONF, O_MAX_RESTARTS,
  O_MONITOR_INTERVAL, O_START_METHOD, O_ROLE, O_NO_PYTHON, O_RUN_PATH, O_LOCAL_ADDR,
  O_RANKS_FILTER, O_USE_ENV, O_REFUSED,
};

#define BOTH(h, u, arg, val) {h, arg, NULL, val}, {u, arg, NULL, val}
static const struct option long_opts[] = {
    BOTH("nproc-per-node", "nproc_per_node", required_argument, 'n'),
    {"nnodes", required_argument, NULL, 'N'},
    BOTH("node-rank", "node_rank", required_argument, 'k'),
    BOTH("master-addr", "master_addr", required_argument, 'a'),
    BOTH("master-port", "master_port", required_argument, 'p'),
    {"standalone", no_argument, NULL, 's'},
    BOTH("log-dir", "log_dir", required_argument, 'l'),
    {"tee", optional_argument, NULL, 't'},
    {"redirects", required_argument, NULL, 'r'},
    {"no-prefix", no_argument, NULL, 'P'},
    {"trace-out", required_argument, NULL, 'T'},
    {"grace-period", required_argument, NULL, 'g'},
    {"join-timeout", required_argument, NULL, 'j'},
    {"timeout", required_argument, NULL, 'o'},
    BOTH("local-rank-arg", "local_rank_arg", no_argument, 'L'),
    BOTH("rdzv-backend", "rdzv_backend", required_argument, O_RDZV_BACKEND),
    BOTH("rdzv-endpoint", "rdzv_endpoint", required_argument, O_RDZV_ENDPOINT),
    BOTH("rdzv-id", "rdzv_id", required_argument, O_RDZV_ID),
    BOTH("rdzv-conf", "rdzv_conf", required_argument, O_RDZV_CONF),
    BOTH("max-restarts", "max_restarts", required_argument, O_MAX_RESTARTS),
    BOTH("monitor-interval", "monitor_interval", required_argument, O_MONITOR_INTERVAL),
    BOTH("start-method", "start_method", required_argument, O_START_METHOD),
    {"role", required_argument, NULL, O_ROLE},
    {"module", no_argument, NULL, 'm'},
    BOTH("no-python", "no_python", no_argument, O_NO_PYTHON),
    BOTH("run-path", "run_path", no_argument, O_RUN_PATH),
    BOTH("local-addr", "local_addr", required_argument, O_LOCAL_ADDR),
    BOTH("local-ranks-filter", "local_ranks_filter", required_argument, O_RANKS_FILTER),
    BOTH("use-env", "use_env", no_argument, O_USE_ENV),
    /* torchrun's, refused with the reason (refusal()) */
    BOTH("logs-specs", "logs_specs", required_argument, O_REFUSED),
    BOTH("event-log-handler", "event_log_handler", required_argument, O_REFUSED),
    BOTH("numa-binding", "numa_binding", required_argument, O_REFUSED),
    BOTH("signals-to-handle", "signals_to_handle", required_argument, O_REFUSED),
    BOTH("virtual-local-rank", "virtual_local_rank", no_argument, O_REFUSED),
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};
#undef BOTH

/* What an option torchrun has and distrun refuses differs in. */
static int refusal(const char *opt) {
  static const struct {
    const char *name, *why;
  } why[] = {
      {"logs-specs", "it names a Python LogsSpecs class; distrun writes --log-dir DIR/rank-R.out "
                     "and .err itself (--redirects, --tee, --local-ranks-filter choose what)"},
      {"event-log-handler", "it names a Python event handler; distrun's events are its stderr "
                            "lines and the verdict row in trace.db"},
      {"numa-binding", "distrun does not bind ranks to NUMA nodes; put numactl in front of the "
                       "program (distrun ... numactl --cpunodebind=... ./prog)"},
      {"signals-to-handle", "distrun always forwards SIGINT, SIGTERM and SIGHUP to the ranks and "
                            "answers SIGUSR1 with a status table; the set cannot be changed"},
      {"virtual-local-rank", "distrun gives each rank its real LOCAL_RANK; restrict the devices "
                             "a rank sees with CUDA_VISIBLE_DEVICES in the program instead"},
  };
  for (size_t i = 0; i < sizeof why / sizeof why[0]; i++) {
    size_t n = strlen(why[i].name);
    bool same = strlen(opt) == n;
    for (size_t k = 0; same && k < n; k++)
      same = opt[k] == why[i].name[k] || (opt[k] == '_' && why[i].name[k] == '-');
    if (same)
      return usage_error("--%s is torchrun's, and distrun does not take it: %s", opt,
                         why[i].why);
  }
  return usage_error("--%s is not supported", opt);
}

/* A stream mask of torchrun's --redirects/--tee: 0 none, 1 stdout, 2
 * stderr, 3 both. Per-rank maps ("0:1,1:2") are refused. */
static int stream_mask(const char *name, const char *arg, int *out) {
  if (arg[0] >= '0' && arg[0] <= '3' && !arg[1]) {
    *out = arg[0] - '0';
    return -1;
  }
  if (strchr(arg, ':'))
    return usage_error("%s %s: per-rank maps (local_rank:value) are torchrun's, and distrun "
                       "takes one value for every rank (0 none, 1 stdout, 2 stderr, 3 both)",
                       name, arg);
  return usage_error("%s needs 0 (none), 1 (stdout), 2 (stderr) or 3 (both), got '%s'", name,
                     arg);
}

/* Whether s is a --tee/-t value (torchrun writes "--tee 3"). */
static bool is_mask(const char *s) { return s && s[0] >= '0' && s[0] <= '3' && !s[1]; }

/* CUDA devices this process sees (core asks the CUDA runtime); 0 with the
 * reason in why when there are none or no CUDA. */
static int visible_gpus(char *why, size_t len) {
  int n = 0;
  if (dist__cuda_device_count(&n) != DIST_OK) {
    snprintf(why, len, "%s", dist_last_errmsg());
    return 0;
  }
  if (n == 0)
    snprintf(why, len, "the CUDA runtime sees no device (CUDA_VISIBLE_DEVICES=%s)",
             getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
  return n;
}

static int cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* --nproc-per-node N|auto|cpu|gpu (torchrun's values; xpu refused). */
static int nproc_option(const char *arg, drun_cfg *c) {
  char why[512] = "";
  int64_t x;
  if (!strcmp(arg, "cpu")) {
    c->nproc = cpu_count();
  } else if (!strcmp(arg, "gpu")) {
    if ((c->nproc = visible_gpus(why, sizeof why)) == 0)
      return usage_error("--nproc-per-node gpu counts the visible CUDA devices, and there are "
                         "none: %s", why);
  } else if (!strcmp(arg, "auto")) {
    if ((c->nproc = visible_gpus(why, sizeof why)) == 0)
      c->nproc = cpu_count();
  } else if (!strcmp(arg, "xpu")) {
    return usage_error("--nproc-per-node xpu: libdist has no XPU backend (cpu, cuda); give a "
                       "number, auto, cpu or gpu");
  } else if (!parse_int(arg, 1, DRUN_MAX_WORLD, &x)) {
    return usage_error("--nproc-per-node needs a number in [1, %d], auto, cpu or gpu, got "
                       "'%s'", DRUN_MAX_WORLD, arg);
  } else {
    c->nproc = (int)x;
  }
  return -1;
}

/* --nnodes N or MIN:MAX (elastic; MIN == MAX is N). */
static int nnodes_option(const char *arg, drun_cfg *c) {
  int64_t lo, hi;
  const char *colon = strchr(arg, ':');
  if (!colon)
    return int_option("--nnodes", arg, 1, DRUN_MAX_WORLD, &lo) < 0
               ? (c->nnodes = c->nnodes_min = (int)lo, -1)
               : DRUN_EXIT_USAGE;
  char a[32];
  snprintf(a, sizeof a, "%.*s", (int)(colon - arg), arg);
  if (!parse_int(a, 1, DRUN_MAX_WORLD, &lo) || !parse_int(colon + 1, 1, DRUN_MAX_WORLD, &hi) ||
      lo > hi)
    return usage_error("--nnodes %s needs N or MIN:MAX with 1 <= MIN <= MAX", arg);
  c->nnodes_min = (int)lo; /* MIN < MAX: elastic (checked with the backend) */
  c->nnodes = (int)hi;
  return -1;
}

/* --rdzv-endpoint HOST[:PORT] (IPv6 in brackets): node 0's store. */
static int endpoint_option(const char *arg, drun_cfg *c, given *g) {
  const char *host = arg, *port = NULL;
  size_t hl;
  if (arg[0] == '[') {
    const char *close = strchr(arg, ']');
    if (!close || (close[1] && close[1] != ':'))
      return usage_error("--rdzv-endpoint %s: an IPv6 address goes in brackets ([::1]:29400)",
                         arg);
    host = arg + 1;
    hl = (size_t)(close - host);
    port = close[1] ? close + 2 : NULL;
  } else {
    const char *colon = strrchr(arg, ':');
    hl = colon ? (size_t)(colon - arg) : strlen(arg);
    port = colon ? colon + 1 : NULL;
  }
  if (!hl || hl >= sizeof c->master_addr)
    return usage_error("--rdzv-endpoint needs HOST[:PORT], got '%s'", arg);
  snprintf(c->master_addr, sizeof c->master_addr, "%.*s", (int)hl, host);
  g->addr = true;
  int64_t x = 29400; /* torchrun's default endpoint port */
  if (port && !parse_int(port, 1, 65535, &x))
    return usage_error("--rdzv-endpoint %s: '%s' is not a port number", arg, port);
  c->master_port = (uint16_t)x;
  g->port = g->port_cli = true;
  return -1;
}

/* --rdzv-conf key=value,...: the keys with a meaning here. */
static int conf_option(const char *arg, drun_cfg *c) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", arg);
  for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq)
      return usage_error("--rdzv-conf: '%s' is not key=value", kv);
    *eq = '\0';
    const char *v = eq + 1;
    if (!strcmp(kv, "join_timeout") || !strcmp(kv, "timeout")) {
      int rc = seconds_option("--rdzv-conf join_timeout", v, &c->join_timeout_ms);
      if (rc >= 0)
        return rc;
    } else if (!strcmp(kv, "keep_alive_interval")) {
      int rc = seconds_option("--rdzv-conf keep_alive_interval", v, &c->keep_alive_ms);
      if (rc >= 0)
        return rc;
      if (c->keep_alive_ms < 10)
        return usage_error("--rdzv-conf keep_alive_interval needs at least 0.01 s, got '%s'", v);
    } else if (!strcmp(kv, "keep_alive_max_attempt")) {
      int64_t n;
      int rc = int_option("--rdzv-conf keep_alive_max_attempt", v, 1, 1000, &n);
      if (rc >= 0)
        return rc;
      c->keep_alive_max = (int)n;
    } else if (!strcmp(kv, "read_timeout") || !strcmp(kv, "close_timeout")) {
      int64_t ms;
      int rc = seconds_option(kv, v, &ms); /* checked; distrun's store needs no tuning */
      if (rc >= 0)
        return rc;
    } else if (!strcmp(kv, "last_call_timeout") || !strcmp(kv, "last_call")) {
      int rc = seconds_option("--rdzv-conf last_call_timeout", v, &c->last_call_ms);
      if (rc >= 0)
        return rc;
    } else if (!strcmp(kv, "is_host")) {
      if (strcmp(v, "0") && strcmp(v, "1") && strcasecmp(v, "true") && strcasecmp(v, "false"))
        return usage_error("--rdzv-conf is_host needs true or false, got '%s'", v);
      c->is_host = strcmp(v, "1") == 0 || !strcasecmp(v, "true"); /* node 0 */
      c->never_host = !c->is_host; /* joins, even when it could bind the endpoint */
    } else {
      return usage_error("--rdzv-conf: unknown key '%s' (join_timeout, timeout, read_timeout, "
                         "last_call_timeout, close_timeout, keep_alive_interval, "
                         "keep_alive_max_attempt, is_host)", kv);
    }
  }
  return -1;
}

/* --local-ranks-filter 0,2: the local ranks whose output the terminal shows. */
static int filter_option(const char *arg, drun_cfg *c) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", arg);
  c->ranks_filter = 0;
  for (char *save = NULL, *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
    int64_t r;
    if (!parse_int(e, 0, DRUN_MAX_LOCAL_FILTER - 1, &r))
      return usage_error("--local-ranks-filter needs local ranks in [0, %d] separated by "
                         "commas, got '%s'", DRUN_MAX_LOCAL_FILTER - 1, arg);
    c->ranks_filter |= 1ull << r;
  }
  if (!c->ranks_filter)
    return usage_error("--local-ranks-filter needs at least one local rank");
  return -1;
}

/* How the program line is run (torchrun: python -u [-m] unless --no-python). */
typedef struct prog_mode {
  bool module, no_python;
} prog_mode;

static int torch_option(int ch, const char *arg, drun_cfg *c, given *g, prog_mode *pm) {
  int64_t x = 0;
  int rc = -1;
  switch (ch) {
  case O_RDZV_BACKEND:
    if (!strcmp(arg, "c10d"))
      c->c10d = true;
    else if (!strcmp(arg, "static"))
      c->c10d = false;
    else if (!strcmp(arg, "etcd") || !strcmp(arg, "etcd-v2"))
      return usage_error("--rdzv-backend %s: distrun hosts the job's store itself on the "
                         "endpoint node (c10d) or node 0 (static); it does not use etcd", arg);
    else
      return usage_error("--rdzv-backend needs c10d or static, got '%s'", arg);
    return -1;
  case O_RDZV_ENDPOINT: return endpoint_option(arg, c, g);
  case O_RDZV_ID:
    if (!dist__rendezvous_job_id_ok(arg) || strlen(arg) > DIST_JOB_ID_MAX - 12)
      return usage_error("--rdzv-id '%s' is not a job id (1 to %d of A-Z a-z 0-9 . _ -)", arg,
                         DIST_JOB_ID_MAX - 12);
    snprintf(c->job_id, sizeof c->job_id, "%s", arg);
    return -1;
  case O_RDZV_CONF: return conf_option(arg, c);
  case O_MAX_RESTARTS:
    if ((rc = int_option("--max-restarts", arg, 0, 1000, &x)) < 0)
      c->max_restarts = (int)x;
    return rc;
  case O_MONITOR_INTERVAL: return seconds_option("--monitor-interval", arg, &c->monitor_interval_ms);
  case O_START_METHOD:
    if (strcmp(arg, "spawn") && strcmp(arg, "fork") && strcmp(arg, "forkserver"))
      return usage_error("--start-method needs spawn, fork or forkserver, got '%s'", arg);
    return -1; /* every rank is a fresh process (fork + exec) whichever is named */
  case O_ROLE:
    if (!*arg)
      return usage_error("--role needs a name");
    c->role = arg;
    return -1;
  case 'm': pm->module = true; return -1;
  case O_NO_PYTHON: pm->no_python = true; return -1;
  case O_RUN_PATH: return -1; /* the script runs as a program either way */
  case O_USE_ENV: return -1;  /* ranks always read LOCAL_RANK from the environment */
  case O_LOCAL_ADDR:
    if (!*arg || strlen(arg) >= DRUN_HOSTLEN)
      return usage_error("--local-addr needs a host name or address");
    c->local_addr = arg;
    return -1;
  case O_RANKS_FILTER: return filter_option(arg, c);
  default: return -2;
  }
}

/* One option; returns -1 to go on, or an exit status. */
static int take_option(int ch, const char *arg, char **argv, drun_cfg *c, given *g,
                       prog_mode *pm) {
  int64_t x = 0;
  int rc = torch_option(ch, arg, c, g, pm);
  if (rc != -2)
    return rc;
  rc = -1;
  switch (ch) {
  case 'n':
    if ((rc = nproc_option(arg, c)) < 0)
      g->nproc = true;
    return rc;
  case 'N':
    if ((rc = nnodes_option(arg, c)) < 0)
      g->nnodes = true;
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
  case 't':
    /* distrun's --tee (both streams) or torchrun's --tee N / -t N. */
    if (!arg && is_mask(argv[optind]))
      arg = argv[optind++];
    if (!arg) {
      c->tee = 3;
      return -1;
    }
    return stream_mask("--tee", arg, &c->tee);
  case 'r':
    g->redirects = true;
    return stream_mask("--redirects", arg, &c->redirects);
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
    fprintf(stderr, "Try '%s --help'.\n", argv[0]);
    return DRUN_EXIT_USAGE;
  }
}

/* torchrun runs python -u [-m] SCRIPT unless --no-python; distrun runs a
 * program directly, and a .py script or a module (-m) under python3 -u. */
static int program_line(int n, char **argv, const prog_mode *pm, drun_cfg *c) {
  if (pm->module && pm->no_python)
    return usage_error("--module runs a Python module and --no-python runs a program "
                       "directly; give one of them");
  size_t len = strlen(argv[0]);
  bool py = pm->module || (!pm->no_python && len > 3 && !strcmp(argv[0] + len - 3, ".py"));
  if (!py) {
    c->prog_argv = argv;
    return -1;
  }
  char **v = dist__calloc((size_t)n + 4, sizeof *v);
  if (!v)
    return usage_error("out of memory");
  int k = 0;
  v[k++] = (char *)"python3";
  v[k++] = (char *)"-u";
  if (pm->module)
    v[k++] = (char *)"-m";
  for (int i = 0; i < n; i++)
    v[k++] = argv[i];
  c->prog_own = v;
  c->prog_argv = v;
  return -1;
}

/* Output routing: --log-dir alone sends both streams to files (distrun's
 * default); torchrun's --redirects/--tee choose per stream, and a stream
 * that is teed is written to its file too. */
static int check_output(drun_cfg *c, const given *g) {
  if (c->tee && !c->log_dir)
    return usage_error("--tee shows on the terminal what goes to the --log-dir files; "
                       "without --log-dir the output is on the terminal already");
  if (c->redirects && !c->log_dir)
    return usage_error("--redirects %d sends output to files in --log-dir, and none is given "
                       "(torchrun would pick a temporary directory; distrun wants it named)",
                       c->redirects);
  if (c->log_dir && !g->redirects)
    c->redirects = 3;
  c->redirects |= c->tee;
  return -1;
}

static int check_cfg(drun_cfg *c, const given *g) {
  int rc = check_output(c, g);
  if (rc >= 0)
    return rc;
  c->nnodes_max = c->nnodes;
  if (c->nnodes_min < c->nnodes && !c->c10d)
    return usage_error("--nnodes %d:%d is elastic, and an elastic job needs --rdzv-backend c10d "
                       "(the static backend gives every node a fixed --node-rank)",
                       c->nnodes_min, c->nnodes);
  if (c->nnodes_min < c->nnodes && g->node_rank && c->node_rank != 0)
    return usage_error("--nnodes %d:%d is elastic: nodes take their ranks in each round in the "
                       "order they join, so --node-rank %d cannot be kept", c->nnodes_min,
                       c->nnodes, c->node_rank);
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
    return usage_error("--nnodes %d needs --master-addr or --rdzv-endpoint (node 0's host name "
                       "or address)", c->nnodes);
  if (c->is_host && g->node_rank && c->node_rank != 0)
    return usage_error("--rdzv-conf is_host=true makes this node 0, but --node-rank is %d",
                       c->node_rank);
  c->node_rank_auto = c->c10d && !g->node_rank && !c->is_host;
  if (!g->port)
    c->master_port = 29500;
  return -1;
}

int dist__run_parse_args(int argc, char **argv, drun_cfg *c) {
  memset(c, 0, sizeof *c);
  c->nproc = 1;
  c->nnodes = c->nnodes_min = 1;
  c->last_call_ms = 30000; /* torchrun's last_call_timeout */
  c->keep_alive_ms = 5000;  /* torchrun's keep_alive_interval */
  c->keep_alive_max = 3;    /* and keep_alive_max_attempt */
  c->prefix = true;
  c->grace_ms = 5000;
  c->join_timeout_ms = -1;
  given g = {0};
  prog_mode pm = {0};
  int ch, rc, li = -1;
  opterr = 1;
  /* '+': stop at the program, so its own options are left alone. */
  while ((ch = getopt_long(argc, argv, "+n:hVmr:t::", long_opts, &li)) != -1) {
    if (ch == O_REFUSED)
      return refusal(long_opts[li].name);
    if ((rc = take_option(ch, optarg, argv, c, &g, &pm)) >= 0)
      return rc;
  }
  if (optind >= argc)
    return usage_error("no program to run");
  c->trace_base = c->trace_out;
  if ((rc = program_line(argc - optind, argv + optind, &pm, c)) >= 0)
    return rc;
  if ((rc = read_env(c, &g)) >= 0)
    return rc;
  read_slurm(c, &g);
  if (c->join_timeout_ms < 0)
    c->join_timeout_ms = dist__default_timeout_ms();
  return check_cfg(c, &g);
}
