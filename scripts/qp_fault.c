// qp_fault: an LD_PRELOAD fault injector for the fault runs. It does
// not touch the program: it interposes libibverbs' ibv_modify_qp and
// ibv_destroy_qp to remember every QP the process brings to RTS, and
// QP_FAULT_AFTER_MS milliseconds after the first one did, moves every QP
// still alive to ERR at once -- with whatever is posted on them
// outstanding. The NIC then flushes that work (IBV_WC_WR_FLUSH_ERR) and
// every later post on those QPs; nothing tells the transport why.
//
// Build: cc -shared -fPIC -O2 -o qp_fault.so qp_fault.c -ldl -lpthread
// Use:   LD_PRELOAD=qp_fault.so QP_FAULT_AFTER_MS=2000 transfer_engine_bench ...
// Prints "qp_fault: moved N QPs to ERR" to stderr when it fires.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_QPS 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_qp *qps[MAX_QPS];
static int nqps;
static int armed;

typedef int (*modify_fn)(struct ibv_qp *, struct ibv_qp_attr *, int);
typedef int (*destroy_fn)(struct ibv_qp *);

static modify_fn real_modify(void) {
  static modify_fn f;
  if (!f) f = (modify_fn)dlvsym(RTLD_NEXT, "ibv_modify_qp", "IBVERBS_1.1");
  return f;
}

static void *fire(void *arg) {
  usleep((useconds_t)(long)arg * 1000);
  pthread_mutex_lock(&lock);
  int moved = 0;
  for (int i = 0; i < nqps; i++) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    if (real_modify()(qps[i], &a, IBV_QP_STATE) == 0) moved++;
  }
  pthread_mutex_unlock(&lock);
  fprintf(stderr, "qp_fault: moved %d QPs to ERR\n", moved);
  return NULL;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
  int rc = real_modify()(qp, attr, mask);
  if (rc || !(mask & IBV_QP_STATE) || attr->qp_state != IBV_QPS_RTS) return rc;
  const char *ms = getenv("QP_FAULT_AFTER_MS");
  pthread_mutex_lock(&lock);
  if (nqps < MAX_QPS) qps[nqps++] = qp;
  if (ms && !armed) {
    armed = 1;
    pthread_t t;
    if (pthread_create(&t, NULL, fire, (void *)atol(ms)) == 0) pthread_detach(t);
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

int ibv_destroy_qp(struct ibv_qp *qp) {
  static destroy_fn real;
  if (!real) real = (destroy_fn)dlvsym(RTLD_NEXT, "ibv_destroy_qp", "IBVERBS_1.1");
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nqps; i++)
    if (qps[i] == qp) qps[i] = qps[--nqps];
  pthread_mutex_unlock(&lock);
  return real(qp);
}
