// A real RDMA transport loop in C++17 over libibverbs that owns every work
// request through railyard's composed hot path (ry_hotpath_*), and nothing
// else: the wr_id comes from ry_hotpath_post (CC admission right before
// ibv_post_send), every polled WC resolves through ry_hotpath_complete
// (classification and settle / retry / stale decided in railyard), a
// bad_wr tail goes back through ry_hotpath_unposted, and QPs are destroyed
// only when ry_hotpath_poll_reclaim says their endpoint drained.
//
// RC loopback on one device (two QPs on the same NIC; Soft-RoCE rxe0 in
// CI): a healthy 1 MiB WRITE in 64 KiB slices, then an injected fault (a
// wrong rkey on one slice) that drives the REM_ACCESS_ERR → WR_FLUSH_ERR →
// reconnect → retry path, a stale completion (a slice settled by the
// caller while its WR is in flight), a duplicate completion, and the
// anomaly queries. Every byte is read back; every railyard gauge ends at 0.
//
// Without an RDMA device it prints "SKIP ry_hotpath_cpp: no RDMA device
// found" and exits 0. RAILYARD_RDMA_DEVICE picks the device,
// RAILYARD_GID_INDEX the GID index (default 1, the RoCE v2 IPv4 GID).
//
// Build: c++ -std=c++17 -Wall -Wextra -Werror -Iffi/include
//        examples/verbs/hotpath_loopback.cpp target/debug/librailyard_ffi.a
//        -libverbs -lpthread -ldl -lm
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "railyard.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "ry_hotpath_cpp: FAIL: %s (railyard: %s)\n", what.c_str(),
               ry_last_error_message());
  std::exit(1);
}

void expect(bool cond, const std::string& what) {
  if (!cond) fail(what);
}

void ok(ry_status st, const char* call) {
  if (st != RY_STATUS_OK) fail(std::string(call) + " returned " + ry_status_name(st));
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

constexpr uint32_t kSlice = 64 * 1024;
constexpr uint32_t kSlices = 16;
constexpr size_t kLen = size_t{kSlice} * kSlices;

// The verbs side: one device, one PD, one CQ, two MRs, and QP pairs.
struct Verbs {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* src = nullptr;
  ibv_mr* dst = nullptr;
  std::vector<uint8_t> src_buf = std::vector<uint8_t>(kLen);
  std::vector<uint8_t> dst_buf = std::vector<uint8_t>(kLen);
  ibv_port_attr port{};
  ibv_gid gid{};
  int gid_index = 1;
  std::string name;
};

struct QpPair {
  ibv_qp* a = nullptr;  // initiator
  ibv_qp* b = nullptr;  // target
};

ibv_qp* make_qp(Verbs& v) {
  ibv_qp_init_attr ia{};
  ia.send_cq = v.cq;
  ia.recv_cq = v.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 64;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(v.pd, &ia);
  expect(qp != nullptr, "ibv_create_qp");
  return qp;
}

void to_rts(Verbs& v, ibv_qp* qp, uint32_t dest_qpn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE;
  expect(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0,
         "QP to INIT");
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = v.port.active_mtu;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = v.gid;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(v.gid_index);
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  expect(ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
         "QP to RTR");
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  expect(ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0,
         "QP to RTS");
}

QpPair connect_pair(Verbs& v) {
  QpPair p{make_qp(v), make_qp(v)};
  to_rts(v, p.a, p.b->qp_num);
  to_rts(v, p.b, p.a->qp_num);
  return p;
}

// Opens the first (or the named) device; false if there is none.
bool open_device(Verbs& v) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    return false;
  }
  const char* want = std::getenv("RAILYARD_RDMA_DEVICE");
  ibv_device* dev = list[0];
  if (want != nullptr) {
    dev = nullptr;
    for (int i = 0; i < n; i++) {
      if (std::strcmp(ibv_get_device_name(list[i]), want) == 0) dev = list[i];
    }
    expect(dev != nullptr, std::string("no device named ") + want);
  }
  v.name = ibv_get_device_name(dev);
  v.ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  expect(v.ctx != nullptr, "ibv_open_device");
  if (const char* g = std::getenv("RAILYARD_GID_INDEX")) v.gid_index = std::atoi(g);
  expect(ibv_query_port(v.ctx, 1, &v.port) == 0, "ibv_query_port");
  expect(ibv_query_gid(v.ctx, 1, v.gid_index, &v.gid) == 0, "ibv_query_gid");
  v.pd = ibv_alloc_pd(v.ctx);
  expect(v.pd != nullptr, "ibv_alloc_pd");
  v.cq = ibv_create_cq(v.ctx, 256, nullptr, nullptr, 0);
  expect(v.cq != nullptr, "ibv_create_cq");
  int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  v.src = ibv_reg_mr(v.pd, v.src_buf.data(), kLen, acc);
  v.dst = ibv_reg_mr(v.pd, v.dst_buf.data(), kLen, acc);
  expect(v.src != nullptr && v.dst != nullptr, "ibv_reg_mr");
  return true;
}

// A railyard endpoint over one QP pair.
struct Endpoint {
  QpPair qps;
  ry_endpoint ep{};
  bool live = false;
};

// The transport: the hot path and the slices it still has to post.
struct Transport {
  Verbs& v;
  ry_hotpath hp{};
  ry_task task{};
  std::vector<Endpoint> eps;  // eps.back() is the live one
  std::deque<ry_slice_ref> queue;
  uint32_t bad_rkey_slice = UINT32_MAX;  // the injected fault
  uint32_t settled_ok = 0;
  uint32_t retries = 0;
  uint32_t stale = 0;
  uint32_t errors = 0;
  uint32_t reconnects = 0;
  std::vector<uint32_t> wc_seen = std::vector<uint32_t>(32);

  explicit Transport(Verbs& verbs) : v(verbs) {
    ry_hotpath_config cfg;
    ok(ry_hotpath_config_default(&cfg), "ry_hotpath_config_default");
    cfg.cc.mode = RY_MODE_ENFORCE;
    cfg.tokens = 256;
    cfg.slices = kSlices;
    cfg.endpoints = 8;
    cfg.qps_per_endpoint = 1;
    cfg.max_wr_per_qp = 64;
    cfg.max_retries = 4;
    const uint16_t route_devices[1] = {0};
    ok(ry_hotpath_create(&cfg, route_devices, 1, &hp), "ry_hotpath_create");
    ok(ry_task_create(&task), "ry_task_create");
    new_endpoint();
  }

  ~Transport() {
    ry_task_destroy(task);
    ry_hotpath_destroy(hp);
  }

  void new_endpoint() {
    Endpoint e;
    e.qps = connect_pair(v);
    ok(ry_hotpath_endpoint_open(hp, eps.size(), &e.ep), "ry_hotpath_endpoint_open");
    e.live = true;
    eps.push_back(e);
  }

  // The one teardown path: retire (no new posts), reconnect on a new route
  // generation (late completions of the old QPs only settle accounting).
  void retire_and_reconnect() {
    Endpoint& cur = eps.back();
    if (!cur.live) return;
    cur.live = false;
    ok(ry_hotpath_endpoint_retire(hp, cur.ep, /*CQ_ERROR*/ 1, now_ns()), "ry_hotpath_endpoint_retire");
    bad_rkey_slice = UINT32_MAX;  // the metadata refresh: fresh rkeys
    new_endpoint();
    uint32_t g = 0;
    ok(ry_hotpath_new_generation(hp, 0, &g), "ry_hotpath_new_generation");
    reconnects++;
  }

  // Posts queued slices until the queue is empty or railyard pushes back.
  void post_some() {
    while (!queue.empty()) {
      ry_slice_ref s = queue.front();
      Endpoint& e = eps.back();
      ry_path path{e.ep, 0, 0, 0};
      ry_post_request req{};
      req.now_ns = now_ns();
      req.paths = &path;
      req.n_paths = 1;
      req.slice = s;
      req.bytes = kSlice;
      req.peer = 0;
      req.has_peer = 1;
      ry_post_result r{};
      ry_status st = ry_hotpath_post(hp, &req, &r);
      if (st == RY_STATUS_POST_REFUSED) {
        // Backpressure (window, QP depth, tokens) waits for completions;
        // a refused endpoint waits for the reconnect; a stale attempt is
        // dropped (its new attempt is queued elsewhere).
        if (r.refusal == RY_REFUSAL_SLICE) {
          queue.pop_front();
          continue;
        }
        return;
      }
      ok(st, "ry_hotpath_post");
      queue.pop_front();
      ibv_sge sge{};
      sge.addr = reinterpret_cast<uintptr_t>(v.src_buf.data()) + size_t{s.index} * kSlice;
      sge.length = kSlice;
      sge.lkey = v.src->lkey;
      ibv_send_wr wr{};
      wr.wr_id = r.wr_id;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(v.dst_buf.data()) + size_t{s.index} * kSlice;
      wr.wr.rdma.rkey = v.dst->rkey ^ (s.index == bad_rkey_slice ? 0x5a5a0000u : 0u);
      ibv_send_wr* bad = nullptr;
      if (ibv_post_send(e.qps.a, &wr, &bad) != 0) {
        // The WR never reached the NIC: only it is released, the attempt
        // stays current and goes back to the queue.
        ok(ry_hotpath_unposted(hp, r.wr_id, now_ns()), "ry_hotpath_unposted");
        queue.push_front(s);
        return;
      }
    }
  }

  // Polls the CQ once; returns the completions it resolved.
  int poll() {
    ibv_wc wcs[32];
    int n = ibv_poll_cq(v.cq, 32, wcs);
    expect(n >= 0, "ibv_poll_cq");
    for (int i = 0; i < n; i++) {
      ry_completion c{};
      ok(ry_hotpath_complete(hp, wcs[i].wr_id, wcs[i].status, wcs[i].vendor_err, now_ns(), &c),
         "ry_hotpath_complete");
      wc_seen[wcs[i].status < 31 ? wcs[i].status : 31]++;
      // Exactly once: the same wr_id again changes nothing.
      ry_completion again{};
      expect(ry_hotpath_complete(hp, wcs[i].wr_id, 0, 0, now_ns(), &again) == RY_STATUS_TOKEN_DUPLICATE,
             "a duplicate completion must be refused");
      if (wcs[i].status != IBV_WC_SUCCESS) {
        errors++;
        // An RC QP is in ERR after an error: retire its endpoint and
        // reconnect, once (the flushes behind it name the old endpoint).
        const Endpoint& cur = eps.back();
        if (c.record.endpoint_slot == cur.ep.slot && c.record.endpoint_generation == cur.ep.generation) {
          retire_and_reconnect();
        }
      }
      switch (c.effect) {
        case RY_SLICE_EFFECT_SETTLED:
          expect(c.slice_state == RY_SLICE_STATE_SUCCEEDED,
                 "slice settled as " + std::to_string(c.slice_state));
          settled_ok++;
          break;
        case RY_SLICE_EFFECT_RETRY:
          retries++;
          queue.push_back(c.next_slice);
          break;
        case RY_SLICE_EFFECT_STALE_RELEASE_ONLY:
          stale++;
          break;
        default:
          fail("unknown slice effect");
      }
    }
    return n;
  }

  // Destroys the QPs of endpoints railyard reports drained.
  void reclaim() {
    auto on_event = [](void* user, const ry_reclaim_event* ev) {
      auto* t = static_cast<Transport*>(user);
      Endpoint& e = t->eps.at(static_cast<size_t>(ev->cookie));
      if (ev->kind == RY_RECLAIM_KIND_FORCE_FLUSH) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_ERR;
        ibv_modify_qp(e.qps.a, &a, IBV_QP_STATE);
        return;
      }
      ibv_destroy_qp(e.qps.a);
      ibv_destroy_qp(e.qps.b);
      e.qps = QpPair{};
    };
    ok(ry_hotpath_poll_reclaim(hp, now_ns(), on_event, this, nullptr), "ry_hotpath_poll_reclaim");
    ok(ry_hotpath_on_epoch(hp, now_ns(), RY_POLLER_STATUS_PROGRESSING, nullptr), "ry_hotpath_on_epoch");
  }

  // Runs until `want` slices succeeded.
  void run_until(uint32_t want) {
    auto t0 = std::chrono::steady_clock::now();
    while (settled_ok < want) {
      post_some();
      if (poll() == 0) reclaim();
      expect(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60), "timed out");
    }
  }

  void open_all() {
    for (uint32_t i = 0; i < kSlices; i++) {
      ry_slice_ref s{};
      ok(ry_hotpath_slice_open(hp, i, task, &s), "ry_hotpath_slice_open");
      queue.push_back(s);
    }
  }

  ry_hotpath_stats stats() {
    ry_hotpath_stats s{};
    ok(ry_hotpath_stats_get(hp, &s), "ry_hotpath_stats_get");
    return s;
  }
};

void fill(std::vector<uint8_t>& b, uint32_t seed) {
  for (size_t i = 0; i < b.size(); i++) b[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
}

}  // namespace

int main() {
  Verbs v;
  if (!open_device(v)) {
    std::printf("SKIP ry_hotpath_cpp: no RDMA device found\n");
    return 0;
  }
  std::printf("RAN ry_hotpath_cpp on %s (GID index %d)\n", v.name.c_str(), v.gid_index);
  {
    Transport t(v);

    // 1. Healthy: 16 × 64 KiB WRITE, read back.
    fill(v.src_buf, 1);
    t.open_all();
    t.run_until(kSlices);
    expect(v.dst_buf == v.src_buf, "healthy WRITE read back different bytes");
    ry_task_state st{};
    ok(ry_task_state_get(t.task, &st), "ry_task_state_get");
    expect(st == RY_TASK_STATE_NORMAL, "healthy task state " + std::to_string(st));
    std::printf("healthy: %u slices, %u retries, task NORMAL\n", t.settled_ok, t.retries);

    // 2. Fault: a wrong rkey on slice 3 (REM_ACCESS_ERR, then WR_FLUSH_ERR
    //    for what was behind it on the QP): classified in railyard as
    //    remote metadata / derived flush, retried on a reconnected endpoint
    //    on a new route generation.
    fill(v.src_buf, 2);
    t.settled_ok = 0;
    t.bad_rkey_slice = 3;
    t.open_all();
    t.run_until(kSlices);
    expect(v.dst_buf == v.src_buf, "WRITE after the fault read back different bytes");
    expect(t.wc_seen[IBV_WC_REM_ACCESS_ERR] >= 1, "no REM_ACCESS_ERR seen");
    expect(t.retries >= 1 && t.reconnects >= 1, "the fault did not retry / reconnect");
    ry_task_detail d{};
    ok(ry_task_detail_get(t.task, &d), "ry_task_detail_get");
    std::printf("fault: REM_ACCESS_ERR x%u, WR_FLUSH_ERR x%u, %u retries, %u reconnects, task state %u\n",
                t.wc_seen[IBV_WC_REM_ACCESS_ERR], t.wc_seen[IBV_WC_WR_FLUSH_ERR], t.retries, t.reconnects,
                d.state);

    // 3. A stale completion: the caller settles slice 0 (a timeout) while
    //    its WR is in flight; the WR's completion then only releases what
    //    its token held.
    ry_slice_ref s{};
    ok(ry_hotpath_slice_open(t.hp, 0, t.task, &s), "ry_hotpath_slice_open");
    t.queue.push_back(s);
    t.post_some();
    ok(ry_hotpath_slice_settle(t.hp, s, /*timed out*/ 1), "ry_hotpath_slice_settle");
    uint32_t stale_before = t.stale;
    auto t0 = std::chrono::steady_clock::now();
    while (t.stale == stale_before) {
      t.poll();
      expect(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30), "stale completion");
    }
    std::printf("stale: the late completion released only its own holds\n");

    // Drain: every retired endpoint reclaimed, every gauge zero.
    for (int i = 0; i < 100; i++) t.reclaim();
    for (Endpoint& e : t.eps) {
      if (e.live) {
        ok(ry_hotpath_endpoint_retire(t.hp, e.ep, /*SHUTDOWN*/ 7, now_ns()), "retire");
        e.live = false;
      }
    }
    t0 = std::chrono::steady_clock::now();
    bool all = false;
    while (!all) {
      t.reclaim();
      all = true;
      for (Endpoint& e : t.eps) all = all && e.qps.a == nullptr;
      expect(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30), "reclaim");
    }
    ry_hotpath_stats z = t.stats();
    expect(z.tokens_in_use == 0 && z.endpoint_outstanding == 0 && z.cc_in_flight == 0 && z.faults == 0,
           "a gauge is not back to zero");
    std::printf("counters: posts %llu, completions %llu, retries %llu, stale %llu, duplicates refused %llu, "
                "tokens 0, endpoint outstanding 0, cc in flight 0\n",
                static_cast<unsigned long long>(z.posts), static_cast<unsigned long long>(z.completions),
                static_cast<unsigned long long>(z.retries), static_cast<unsigned long long>(z.stale_completions),
                static_cast<unsigned long long>(z.bad_wr_ids));
  }
  ibv_dereg_mr(v.src);
  ibv_dereg_mr(v.dst);
  ibv_destroy_cq(v.cq);
  ibv_dealloc_pd(v.pd);
  ibv_close_device(v.ctx);
  std::printf("ry_hotpath_cpp: all checks passed\n");
  return 0;
}
