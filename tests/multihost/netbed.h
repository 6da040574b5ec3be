/* netbed.h - the multi-host test bed (tests/multihost/netbed.sh) from C:
 * a bed of network namespaces ("hosts") that lives as long as the test,
 * and jobs of one distrun per host, each started inside its host as on a
 * cluster (--nnodes, --node-rank, node 0 hosting the store).
 *
 * Cleanup does not depend on the test ending well: netbed_up starts a
 * guardian (`netbed.sh guard`, in its own session) that reads a pipe whose
 * only writer is the test process (close-on-exec, so no rank or distrun
 * inherits it). When the test ends in any way, the assertion that failed,
 * a crash, ctest's SIGKILL at the timeout, the pipe closes and the
 * guardian kills every process in the bed's namespaces and removes links,
 * bridge, nftables tables and namespaces. netbed_down does the same at
 * once and says what, if anything, was left. Beds are named dtb<pid>,
 * so parallel tests never meet, and each netbed_up sweeps beds whose
 * owner has died. */
#ifndef DIST_TEST_NETBED_H
#define DIST_TEST_NETBED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "proc.h"

#define NETBED_MAX_HOSTS 8
#define NETBED_PORT 29500 /* node 0's store: every host has its own ports */

typedef struct netbed {
  char prefix[16];   /* dtb<pid>[x<tag>] */
  int hosts;
  int guard_fd;      /* the guardian's pipe (write end); -1 once down */
  pid_t guard_pid;
  char dir[256];     /* scratch directory of the test: traces, logs */
  char err[4096];    /* why netbed_up failed, what netbed_down found left */
} netbed;

/* Whether this machine can hold a bed (root, iproute2, namespaces, veth,
 * bridge); why not in why. */
bool netbed_supported(char *why, size_t len);
/* Creates hosts namespaces; skew_s > 0 puts host k's processes in a time
 * namespace whose monotonic clock is k*skew_s seconds ahead. The prefix is
 * dtb<pid>, or $NETBED_PREFIX when set (a test that checks another test's
 * leftovers). Returns 0, or -1 with b->err. */
int netbed_up(netbed *b, int hosts, int skew_s);
/* Removes the bed now; 0 when nothing is left, else -1 with the leftovers
 * in b->err. Accepts a bed that is already down. */
int netbed_down(netbed *b);
/* What of bed `prefix` exists (namespaces, links, processes): "" when
 * nothing. Returns buf. */
char *netbed_left(const char *prefix, char *buf, size_t len);
/* Runs `netbed.sh SUB PREFIX args...` (NULL-terminated); its status. */
int netbed_sh(netbed *b, const char *sub, ...);
/* Host k's address (static storage, four live at once). */
const char *netbed_addr(int k);
/* $DIST_TEST_SRC/tests/multihost/netbed.sh */
const char *netbed_script(void);

/* One node: a distrun in host `host`, with its own options (the
 * rendezvous, --nnodes, --trace-out, ...: everything before the program). */
typedef struct netbed_node {
  int host;
  const char *const *opts; /* distrun's options, NULL-terminated */
  const char *const *prog; /* the rank program and its arguments, NULL-terminated */
  const char *const *env;  /* "NAME=value", NULL-terminated, may be NULL */
} netbed_node;

/* Starts `netbed.sh exec P host distrun opts... prog...` into p, with the
 * bed's shared DIST_TOKEN and DIST_TRACE=DIR/traces (as every node of a
 * job has them), then n->env. Tests whose nodes differ (elastic
 * rendezvous, late nodes) start each node with it. */
void netbed_node_start(netbed *b, dist_proc *p, const netbed_node *n);

/* A job: one distrun per host, nproc ranks each. */
typedef struct netbed_job {
  netbed *bed;
  int nnodes, nproc;
  dist_proc node[NETBED_MAX_HOSTS];
  char trace[NETBED_MAX_HOSTS][320]; /* node k's --trace-out */
} netbed_job;

/* Starts the job: `netbed.sh exec P k distrun --nnodes N --node-rank k
 * --master-addr <host 0> --master-port 29500 -n nproc --trace-out
 * DIR/trace-k.db prog...` for every host, with a shared DIST_TOKEN, the
 * ranks' traces under DIR/traces (one directory, as on a shared file
 * system), and env ("NAME=value", NULL-terminated, may be NULL). */
void netbed_job_start(netbed_job *j, netbed *b, int nnodes, int nproc, const char *const *env,
                      const char *const *prog);
/* Waits for every node's distrun (deadline; stragglers are killed). */
void netbed_job_finish(netbed_job *j, int timeout_ms);
/* Every node's stdout and stderr, labelled, for a failure message (static
 * storage, overwritten by the next call). */
const char *netbed_job_output(const netbed_job *j);
/* The pid of a process in host k whose program is exe (argv[0]'s last
 * component) and whose command line (argv joined with spaces) holds needle
 * (NULL: any), or -1 when none appears within timeout_ms. */
pid_t netbed_find(netbed *b, int k, const char *exe, const char *needle, int timeout_ms);

#endif
