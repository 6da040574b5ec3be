/* mpi_boot.c - the process's MPI: initialisation, the serialising lock,
 * finalisation at exit, and the bootstrap that lets a job launched by
 * mpirun rendezvous without MASTER_ADDR (see mpi_int.h).
 *
 * The bootstrap keeps everything else unchanged: rank 0 hosts an ordinary
 * TCP store (port picked by the kernel, a fresh token unless DIST_TOKEN is
 * set) and broadcasts "host port token" over MPI_COMM_WORLD; every rank then
 * rendezvouses over that store as with an explicit store, so helper groups,
 * monitored_barrier and the checking layer's exchanges work as on the cpu
 * backend. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "net/auth.h"
#include <dist/internal/launch.h>
#include "job/rendezvous.h"
#include "mpi_int.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
static bool inited;      /* dist__mpi_ensure_init succeeded */
static bool need_lock;   /* MPI gave less than THREAD_MULTIPLE */
static bool we_init;     /* we called MPI_Init_thread (so we finalise) */
static atomic_bool stuck;
static dist_store *boot_store;

const char *dist__mpi_errstr(int code, char *buf, size_t len) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(code, s, &n) != MPI_SUCCESS)
    snprintf(s, sizeof s, "MPI error %d", code);
  snprintf(buf, len, "%s", s);
  return buf;
}

void dist__mpi_lock(void) {
  if (need_lock)
    pthread_mutex_lock(&call_lock);
}

void dist__mpi_unlock(void) {
  if (need_lock)
    pthread_mutex_unlock(&call_lock);
}

void dist__mpi_mark_stuck(void) { atomic_store(&stuck, true); }

/* MPI_Finalize waits for requests still in flight; after a timeout some
 * never complete, so the job ends through MPI_Abort, after our report. */
static void finalize_at_exit(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin)
    return;
  if (atomic_load(&stuck)) {
    fprintf(stderr, "libdist: MPI operations were left in flight after a failure "
                    "(see the errors above); ending the job with MPI_Abort\n");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

bool dist__mpi_launched(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int dist__mpi_ensure_init(dist__errbuf *err) {
  pthread_mutex_lock(&init_lock);
  int rc = DIST_OK, flag = 0, provided = 0;
  if (inited)
    goto out;
  MPI_Initialized(&flag);
  if (!flag) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) {
      rc = dist__err_set(err, DIST_E_BACKEND, "MPI was finalised; it cannot start again");
      goto out;
    }
    int e = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (e != MPI_SUCCESS) {
      char s[256];
      rc = dist__err_set(err, DIST_E_BACKEND, "MPI_Init_thread failed: %s",
                         dist__mpi_errstr(e, s, sizeof s));
      goto out;
    }
    we_init = true;
    atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    rc = dist__err_set(err, DIST_E_NOTSUP,
                       "the program initialised MPI with thread level %d; the mpi backend "
                       "needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE", provided);
    goto out;
  }
  need_lock = provided < MPI_THREAD_MULTIPLE;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  inited = true;
  DIST_LOG(INFO, MPI, "MPI ready (thread level %d%s%s)", provided,
           need_lock ? ", calls serialised" : "", we_init ? "" : ", initialised by the program");
out:
  pthread_mutex_unlock(&init_lock);
  return rc;
}

/* What rank 0 broadcasts. rc != 0: it failed, msg says why. */
typedef struct boot_msg {
  int rc;
  int port;
  char host[256];
  char token[DIST_TOKEN_MAX + 1];
  char msg[512];
} boot_msg;

static void host_store(boot_msg *m, int64_t timeout_ms) {
  const char *tok = NULL;
  if (dist__env_token(&tok) != DIST_OK)
    tok = NULL;
  if (tok)
    snprintf(m->token, sizeof m->token, "%s", tok);
  else if (dist__auth_make_token(m->token, sizeof m->token) != DIST_OK)
    m->token[0] = '\0';
  dist_store_tcp_opts to = {0};
  to.is_server = true;
  to.timeout_ms = timeout_ms;
  to.token = m->token;
  to.allow_remote = m->token[0] != '\0';
  m->rc = dist_store_tcp_create(&to, &boot_store);
  if (m->rc != DIST_OK) {
    snprintf(m->msg, sizeof m->msg, "rank 0 could not host the job store: %s",
             dist_last_errmsg());
    return;
  }
  m->port = dist_store_tcp_port(boot_store);
  /* Without a token the server listens on loopback only. */
  snprintf(m->host, sizeof m->host, "%s", m->token[0] ? dist__hostname() : "127.0.0.1");
}

int dist__mpi_bootstrap(dist_init_opts *o) {
  dist__errbuf err;
  dist__err_clear(&err);
  if (dist__mpi_ensure_init(&err) != DIST_OK)
    return dist__set_last_error(DIST_E_BACKEND, "%s", err.msg);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if ((o->rank >= 0 && o->rank != rank) || (o->world_size >= 0 && o->world_size != size))
    return dist__set_last_error(DIST_E_INVAL,
                                "backend mpi: rank %d of %d was asked for, but MPI says rank "
                                "%d of %d (leave rank and world_size unset under mpirun)",
                                o->rank, o->world_size, rank, size);
  int64_t timeout = o->timeout_ms > 0 ? o->timeout_ms : dist__default_timeout_ms();
  boot_msg m;
  memset(&m, 0, sizeof m);
  if (rank == 0)
    host_store(&m, timeout);
  dist__mpi_lock();
  int e = MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, 0, MPI_COMM_WORLD);
  dist__mpi_unlock();
  if (e != MPI_SUCCESS) {
    char s[256];
    dist_store_destroy(boot_store);
    boot_store = NULL;
    return dist__set_last_error(DIST_E_BACKEND, "backend mpi: bootstrap broadcast failed: %s",
                                dist__mpi_errstr(e, s, sizeof s));
  }
  if (m.rc != DIST_OK)
    return dist__set_last_error(m.rc, "backend mpi: %s", m.msg);
  if (rank != 0) {
    dist_store_tcp_opts to = {0};
    to.host = m.host;
    to.port = (uint16_t)m.port;
    to.timeout_ms = timeout;
    to.token = m.token;
    int rc = dist_store_tcp_create(&to, &boot_store);
    if (rc != DIST_OK) {
      char why[DIST_ERRMSG_LEN];
      snprintf(why, sizeof why, "%s", dist_last_errmsg());
      return dist__set_last_error(rc, "backend mpi: cannot reach rank 0's store at %s:%d: %s",
                                  m.host, m.port, why);
    }
  }
  o->store = boot_store;
  o->rank = rank;
  o->world_size = size;
  DIST_LOG(INFO, MPI, "bootstrap: rank %d of %d from MPI, store at %s:%d", rank, size, m.host,
           m.port);
  return DIST_OK;
}

/* Rank 0's server must outlive every rank's last use of the store, so the
 * ranks meet first (all of them destroy the default group; a rank that died
 * has made mpirun end the job already). */
/* --- the watchdog of blocking calls -------------------------------------- */

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cv = PTHREAD_COND_INITIALIZER;
static dist__mpi_watch *watched;
static bool watch_started;

static void watch_expired(const dist__mpi_watch *w) {
  char d[160];
  fprintf(stderr,
          "libdist: %s #%llu on group %s (rank %d of %d) timed out after %lld ms: not every "
          "member took part; MPI cannot interrupt a blocking call, so the job ends with "
          "MPI_Abort\n",
          dist_coll_describe(w->c, d, sizeof d), (unsigned long long)w->c->seq, w->group,
          w->rank, w->size, (long long)w->c->timeout_ms);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void *watch_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&watch_lock);
  for (;;) {
    int64_t now = dist__now_ms();
    for (dist__mpi_watch *w = watched; w; w = w->next)
      if (now > w->deadline_ms)
        watch_expired(w);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000000L; /* 100 ms: a timeout is not a latency */
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&watch_cv, &watch_lock, &ts);
  }
  return NULL;
}

void dist__mpi_watch_arm(dist__mpi_watch *w) {
  pthread_mutex_lock(&watch_lock);
  if (!watch_started) {
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    watch_started = pthread_create(&t, &at, watch_main, NULL) == 0;
    if (watch_started)
      pthread_setname_np(t, "dist-mpi-watch");
    pthread_attr_destroy(&at);
  }
  w->next = watched;
  watched = w;
  pthread_mutex_unlock(&watch_lock);
}

void dist__mpi_watch_disarm(dist__mpi_watch *w) {
  pthread_mutex_lock(&watch_lock);
  for (dist__mpi_watch **p = &watched; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  pthread_mutex_unlock(&watch_lock);
}

bool dist__mpi_sync_blocking(void) {
  static int mode = -1; /* read once */
  if (mode < 0) {
    const char *v = dist__getenv("DIST_MPI_SYNC");
    mode = !v || strcmp(v, "nonblocking") != 0;
    if (v && strcmp(v, "blocking") && strcmp(v, "nonblocking"))
      DIST_LOG(WARNING, MPI, "DIST_MPI_SYNC='%s' is not blocking or nonblocking; using blocking",
               v);
  }
  return mode && !need_lock;
}

void dist__mpi_boot_release(void) {
  if (!boot_store)
    return;
  if (!atomic_load(&stuck)) {
    dist__mpi_lock();
    MPI_Barrier(MPI_COMM_WORLD);
    dist__mpi_unlock();
  }
  dist_store_destroy(boot_store);
  boot_store = NULL;
}
