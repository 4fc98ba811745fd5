// railyard from C++17: RAII owners over the C handles (railyard.hpp), and a transport-like
// post/complete loop across two threads. Every resource an attempt takes
// (rail charge, CC permit, token) travels in its token record and is
// released exactly once from the completion; at the end every counter is
// back to zero. Built with -std=c++17 -Wall -Wextra -Werror and run by
// ffi/tests/c_examples.rs against the shared library.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "abi_check.h"
#include "check.h"
#include "railyard.hpp"

namespace {

// Throws ry::Error on any error status, naming the call.
void ry_try(ry_status st, const char* what) {
  try {
    ry::check(st);
  } catch (const ry::Error& e) {
    throw std::runtime_error(std::string(what) + ": " + e.what());
  }
}

using Pool = ry::TokenPool;
using Cc = ry::Cc;
using Rail = ry::Rail;

Pool make_pool(uint32_t capacity) { return ry::make_token_pool(capacity).value(); }

Cc make_cc(uint16_t devices) {
  ry_cc_config cfg{};
  ry::check(ry_cc_config_default(&cfg));
  cfg.mode = RY_MODE_ENFORCE;
  cfg.min_window_bytes = 1 << 20;
  cfg.max_window_bytes = 4 << 20;
  // One route per device: route i on device i.
  std::vector<uint16_t> routes;
  for (uint16_t d = 0; d < devices; d++) routes.push_back(d);
  return ry::make_cc(cfg, devices, routes).value();
}

Rail make_rail(uint16_t devices) {
  return ry::make_rail(std::vector<ry_device_spec>(devices, ry_device_spec{25000000000ULL, 256}))
      .value();
}

// railyard.hpp's error paths: an expected-like result that holds the
// error, value() throwing it, and check() on a destroyed handle.
void error_paths() {
  ry::Result<Pool> bad = ry::make_token_pool(0);
  CHECK(!bad.ok() && bad.error().status() != RY_STATUS_OK);
  bool threw = false;
  try {
    (void)std::move(bad).value();
  } catch (const ry::Error& e) {
    threw = e.status() == bad.error().status() && std::string(e.what()).find(e.name()) == 0;
  }
  CHECK(threw);
  ry_token_pool stale{};
  {
    Pool p = make_pool(4);
    stale = p.get();
    CHECK(static_cast<bool>(p));
  }  // destroyed here
  uint32_t n = 0;
  threw = false;
  try {
    ry::check(ry_token_pool_in_use(stale, &n));
  } catch (const ry::Error& e) {
    threw = e.status() == RY_STATUS_INVALID_HANDLE;
  }
  CHECK(threw);
  // A token cache owns its handle too; a bad capacity is a typed error.
  {
    Pool p = make_pool(8);
    CHECK(!ry::make_token_cache(p, 3).ok());
    ry::TokenCache c = ry::make_token_cache(p, 4).value();
    ry_token_record rec{};
    uint64_t w = 0;
    ry::check(ry_token_cache_claim(c.get(), p.get(), &rec, &w));
    ry::check(ry_token_cache_complete(c.get(), p.get(), w, &rec));
    uint32_t cached = 0;
    ry::check(ry_token_cache_cached(c.get(), &cached, nullptr));
    CHECK(cached >= 1 && cached <= 4);  // the slot came back to the cache
  }  // the cache (its token back in the pool), then the pool, destroyed here
  // Moving transfers ownership: the source owns nothing afterwards.
  Pool a = make_pool(4);
  Pool b = std::move(a);
  CHECK(!a && b);  // NOLINT(bugprone-use-after-move): checking the moved-from state
}

struct Stats {
  std::atomic<uint64_t> posted{0}, deferred{0}, ok{0}, failed{0};
};

// One worker: post `n` slices (pick a rail, admit, record, claim), then
// complete them with a mix of WC statuses and release from the record.
void worker(const Pool& pool, const Cc& cc, const Rail& rail, uint32_t peer,
            int n, Stats& st) {
  std::vector<uint64_t> wr_ids;
  uint64_t now = 1000;
  for (int i = 0; i < n; i++, now += 10) {
    ry_rail_pick_result pick{};
    ry_try(ry_rail_pick(rail.get(), &peer, 65536, now, &pick), "pick");
    ry_admission adm{};
    ry_try(ry_cc_try_acquire(cc.get(), pick.charge.device, pick.charge.device,
                             65536, now, &adm),
           "try_acquire");
    if (adm.kind != RY_ADMISSION_KIND_ADMIT) {
      // Not posted: give the rail charge back at once.
      ry_try(ry_rail_release(rail.get(), &pick.charge, 0, now, now), "rail_release");
      st.deferred++;
      continue;
    }
    ry_token_record rec{};
    rec.slice_index = static_cast<uint32_t>(i);
    rec.slice_attempt = 1;
    rec.post_ns = now;
    rec.has_peer = 1;
    rec.peer = peer;
    ry_try(ry_permit_record_into(&adm.permit, &rec), "permit_record_into");
    ry_try(ry_rail_charge_record_into(&pick.charge, &rec), "rail_record_into");
    CHECK(adm.permit.held == 0 && pick.charge.held == 0);
    uint64_t wr_id = 0;
    ry_try(ry_token_claim(pool.get(), &rec, &wr_id), "claim");
    wr_ids.push_back(wr_id);
    st.posted++;
  }
  // The completion side only sees wr_ids and statuses.
  for (size_t i = 0; i < wr_ids.size(); i++, now += 10) {
    const uint32_t status = (i % 5 == 4) ? 13u /* RNR_RETRY_EXC_ERR */ : 0u;
    ry_token_record rec{};
    ry_try(ry_token_complete(pool.get(), wr_ids[i], &rec), "complete");
    CHECK((rec.holds & (RY_HOLDS_PERMIT | RY_HOLDS_RAIL_CHARGE)) ==
          (RY_HOLDS_PERMIT | RY_HOLDS_RAIL_CHARGE));
    ry_wc_classification wc{};
    ry_try(ry_classify_wc(status, 0, &wc), "classify");
    ry_try(ry_cc_release_record(cc.get(), &rec, wc.effect, nullptr), "cc_release_record");
    ry_try(ry_rail_release_record(rail.get(), &rec, wc.class_ == RY_FAILURE_CLASS_SUCCESS, now),
           "rail_release_record");
    CHECK((rec.holds & (RY_HOLDS_PERMIT | RY_HOLDS_RAIL_CHARGE)) == 0);
    // A second completion is refused and releases nothing: a duplicate, or
    // stale if the other thread has already reused the slot.
    const ry_status again = ry_token_complete(pool.get(), wr_ids[i], &rec);
    CHECK(again == RY_STATUS_TOKEN_DUPLICATE || again == RY_STATUS_TOKEN_STALE);
    (wc.class_ == RY_FAILURE_CLASS_SUCCESS ? st.ok : st.failed)++;
  }
}

// A credit update through the wire codec and back, as a receiver would
// send it: bytes in, the same update out, and a replayed copy is a no-op.
void wire_and_replay() {
  ry_charge capacity{{1 << 20, 8, 0, 8}};
  ry_credit_allocator_config acfg{};
  const ry_session_id session{42, 7};
  ry_try(ry_credit_allocator_config_init(session, 1, 1, &capacity, &acfg), "alloc_config");
  ry::CreditReceiver receiver = ry::make_credit_receiver(acfg).value();
  const ry_credit_receiver rx = receiver.get();
  uint64_t epoch = 0;
  ry_try(ry_credit_receiver_open(rx, 0, &epoch), "open");
  ry_wire_message msg{};
  msg.msg_type = RY_MSG_TYPE_CREDIT_UPDATE;
  ry_charge add{{65536, 2, 0, 2}};
  ry_try(ry_credit_receiver_grant(rx, 0, 0, &add, &msg.update), "grant");

  std::vector<uint8_t> bytes(RY_WIRE_MAX_MESSAGE_LEN);
  size_t len = 0;
  ry_try(ry_wire_encode(&msg, bytes.data(), bytes.size(), &len), "encode");
  bytes.resize(len);
  ry_wire_message back{};
  ry_try(ry_wire_decode(bytes.data(), bytes.size(), &back), "decode");
  CHECK(back.msg_type == RY_MSG_TYPE_CREDIT_UPDATE);
  CHECK(std::memcmp(&back.update, &msg.update, sizeof msg.update) == 0);

  ry_credit_ledger_config lcfg{};
  ry_try(ry_credit_ledger_config_default(&lcfg), "ledger_config");
  ry::CreditSender sender = ry::make_credit_sender(lcfg).value();
  const ry_credit_sender tx = sender.get();
  ry_try(ry_credit_bind(tx, 0, session, epoch), "bind");
  ry_update_outcome first{}, replay{};
  ry_try(ry_credit_apply_update(tx, 0, &back.update, 0, &first, nullptr), "apply");
  ry_try(ry_credit_apply_update(tx, 0, &back.update, 1, &replay, nullptr), "replay");
  CHECK(first == RY_UPDATE_OUTCOME_APPLIED && replay == RY_UPDATE_OUTCOME_DUPLICATE);
  ry_charge avail{};
  ry_try(ry_credit_available(tx, 0, 0, &avail, nullptr), "available");
  CHECK(avail.v[RY_RESOURCE_DATA_BYTES] == 65536 && avail.v[RY_RESOURCE_REQUEST_SLOTS] == 2);
  // One byte short: a typed error, nothing decoded.
  CHECK(ry_wire_decode(bytes.data(), bytes.size() - 1, &back) == RY_STATUS_WIRE_TRUNCATED);
}  // sender and receiver are destroyed here

}  // namespace

int main() {
  ry_check_abi();
  error_paths();
  wire_and_replay();
  constexpr uint16_t kDevices = 2;
  constexpr int kThreads = 2;
  constexpr int kSlicesPerThread = 200;
  Pool pool = make_pool(1024);
  Cc cc = make_cc(kDevices);
  Rail rail = make_rail(kDevices);

  Stats st;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      try {
        worker(pool, cc, rail, static_cast<uint32_t>(t), kSlicesPerThread, st);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "worker %d: %s\n", t, e.what());
        std::abort();
      }
    });
  }
  for (auto& t : threads) t.join();

  CHECK(st.posted + st.deferred == uint64_t{kThreads} * kSlicesPerThread);
  CHECK(st.ok + st.failed == st.posted);
  CHECK(st.posted > 0 && st.failed > 0);

  // Permit, charge and token accounting all back to zero.
  uint32_t in_use = 1;
  ry_try(ry_token_pool_in_use(pool.get(), &in_use), "in_use");
  CHECK(in_use == 0);
  for (uint16_t d = 0; d < kDevices; d++) {
    ry_domain_snapshot dev{}, route{};
    ry_try(ry_cc_device_snapshot(cc.get(), d, &dev), "device_snapshot");
    ry_try(ry_cc_route_snapshot(cc.get(), d, &route), "route_snapshot");
    CHECK(dev.in_flight == 0 && route.in_flight == 0);
    uint64_t nic = 1;
    ry_try(ry_rail_nic_inflight(rail.get(), d, &nic), "nic_inflight");
    CHECK(nic == 0);
  }
  ry_cc_stats cs{};
  ry_try(ry_cc_stats_get(cc.get(), &cs), "cc_stats");
  CHECK(cs.underflow_refusals == 0 && cs.illegal_transitions == 0);
  ry_rail_counters rc{};
  ry_try(ry_rail_counters_get(rail.get(), &rc), "rail_counters");
  CHECK(rc.nic_accounting_errors == 0 && rc.decisions == uint64_t{kThreads} * kSlicesPerThread);

  // A destroyed handle is an error from any thread, never a crash.
  ry_token_pool stale = pool.get();
  { Pool moved(std::move(pool)); }
  CHECK(ry_token_pool_in_use(stale, &in_use) == RY_STATUS_INVALID_HANDLE);

  std::printf("railyard C++ example: %llu posted, %llu deferred, %llu ok, %llu failed\n",
              static_cast<unsigned long long>(st.posted.load()),
              static_cast<unsigned long long>(st.deferred.load()),
              static_cast<unsigned long long>(st.ok.load()),
              static_cast<unsigned long long>(st.failed.load()));
  return 0;
}
