/* railyard C++ API: RAII owners and typed errors over the C ABI in
 * railyard.h. Header-only, C++17, nothing but the C library underneath.
 *
 *  - ry::Error (a std::runtime_error) carries the ry_status, its name and
 *    the library's message for the failing call; ry::check(status) throws
 *    it.
 *  - ry::Result<T> is an expected-like value-or-error for code that does not
 *    use exceptions: ok(), value() (throws ry::Error if it holds an error),
 *    error(), operator->.
 *  - ry::Handle<H, Destroy> owns one handle (move-only; the destructor calls
 *    Destroy). ry::TokenCache, ry::Task (ry::Engine with RY_ENGINE;
 *    ry::TokenPool, ry::Cc, ry::Rail, ry::CreditSender, ry::CreditReceiver
 *    with RY_LAYERS, the per-layer ABI) are its instances; make_*() create
 *    them, ry::create<Owner>(ry_*_create, args...) wraps any constructor
 *    whose last parameter is the out-handle.
 *
 * Data-path calls stay the C functions on .get(): they are noexcept, return
 * ry_status, and some non-OK results are expected outcomes (a duplicate
 * completion is RY_STATUS_TOKEN_DUPLICATE), not failures.
 *
 *   ry::TokenPool pool = ry::make_token_pool(1024).value();     // RY_LAYERS; throws on error
 *   uint64_t wr_id = 0;
 *   ry::check(ry_token_claim(pool.get(), &record, &wr_id));
 *   // pool is destroyed at the end of the scope
 *
 * Adding an object kind: one `using X = Handle<ry_x, ry_x_destroy>;` and
 * one make_x() calling create<X>(ry_x_create, ...). */
#ifndef RAILYARD_HPP
#define RAILYARD_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "railyard.h"

namespace ry {

/* A failed call: its status, the status's name and the library's message
 * (ry_last_error_message() of the failing thread, captured at once). */
class Error : public std::runtime_error {
 public:
  Error(ry_status status, const std::string& message)
      : std::runtime_error(std::string(ry_status_name(status)) + ": " + message),
        status_(status),
        message_(message) {}
  ry_status status() const noexcept { return status_; }
  const char* name() const noexcept { return ry_status_name(status_); }
  const std::string& message() const noexcept { return message_; }

 private:
  ry_status status_;
  std::string message_;
};

/* The error of `status` with the calling thread's last message. */
inline Error error_of(ry_status status) {
  const char* m = ry_last_error_message();
  return Error(status, m != nullptr ? m : "");
}

/* Throws ry::Error unless `status` is RY_STATUS_OK. */
inline void check(ry_status status) {
  if (status != RY_STATUS_OK) throw error_of(status);
}

/* A value or the Error that prevented it (like C++23 std::expected<T, Error>). */
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}    // NOLINT: implicit, as expected<T> is
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const noexcept { return std::holds_alternative<T>(v_); }
  explicit operator bool() const noexcept { return ok(); }
  /* The value; throws the Error if there is none. */
  T& value() & {
    if (!ok()) throw std::get<Error>(v_);
    return std::get<T>(v_);
  }
  T&& value() && {
    if (!ok()) throw std::get<Error>(v_);
    return std::get<T>(std::move(v_));
  }
  /* The error; only valid when !ok(). */
  const Error& error() const { return std::get<Error>(v_); }
  T* operator->() { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Error> v_;
};

/* A move-only owner of one handle: destroyed with `Destroy` when it goes out
 * of scope (a zero handle owns nothing). */
template <typename H, ry_status (*Destroy)(H)>
class Handle {
 public:
  using handle_type = H;
  Handle() noexcept = default;
  explicit Handle(H h) noexcept : h_(h) {}
  Handle(Handle&& o) noexcept : h_(o.release()) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  /* The C handle, for ry_* calls; still owned. */
  H get() const noexcept { return h_; }
  explicit operator bool() const noexcept { return h_.bits != 0; }
  /* Gives up ownership: the caller destroys the returned handle. */
  H release() noexcept {
    H h = h_;
    h_ = H{};
    return h;
  }
  /* Destroys the owned handle (if any) and owns `h` instead. */
  void reset(H h = H{}) noexcept {
    if (h_.bits != 0) (void)Destroy(h_);
    h_ = h;
  }

 private:
  H h_{};
};

using TokenCache = Handle<ry_token_cache, ry_token_cache_destroy>;
using Task = Handle<ry_task, ry_task_destroy>;
#if defined(RY_LAYERS)
using TokenPool = Handle<ry_token_pool, ry_token_pool_destroy>;
using Cc = Handle<ry_cc, ry_cc_destroy>;
using Rail = Handle<ry_rail, ry_rail_destroy>;
using CreditSender = Handle<ry_credit_sender, ry_credit_sender_destroy>;
using CreditReceiver = Handle<ry_credit_receiver, ry_credit_receiver_destroy>;
#endif
#if defined(RY_ENGINE)
using Engine = Handle<ry_engine, ry_engine_destroy>;
#endif

/* Calls `create(args..., &handle)` and wraps the new handle in `Owner`, or
 * returns the error. */
template <typename Owner, typename F, typename... A>
Result<Owner> create(F create_fn, A&&... args) {
  typename Owner::handle_type h{};
  const ry_status st = create_fn(std::forward<A>(args)..., &h);
  if (st != RY_STATUS_OK) return error_of(st);
  return Owner(h);
}

/* Task evidence for one transfer. */
inline Result<Task> make_task() { return create<Task>(ry_task_create); }

#if defined(RY_LAYERS)
/* A token pool of `capacity` attempts. */
inline Result<TokenPool> make_token_pool(uint32_t capacity) {
  return create<TokenPool>(ry_token_pool_create, capacity);
}

/* A per-thread cache of at most `capacity` free tokens over `pool` (a
 * power of two in 2..=RY_TOKEN_CACHE_MAX_CAPACITY); destroying it returns
 * its tokens. For a hot path's pool: create<TokenCache>(
 * ry_hotpath_token_cache_create, hp, capacity). */
inline Result<TokenCache> make_token_cache(const TokenPool& pool, uint32_t capacity) {
  return create<TokenCache>(ry_token_cache_create, pool.get(), capacity);
}

/* A congestion controller over `devices` devices; route i is on device
 * route_devices[i]. */
inline Result<Cc> make_cc(const ry_cc_config& cfg, uint16_t devices,
                          const std::vector<uint16_t>& route_devices) {
  return create<Cc>(ry_cc_create, &cfg, devices, route_devices.data(), route_devices.size());
}

/* A rail selector over `devices` (nullptr config: the defaults). */
inline Result<Rail> make_rail(const std::vector<ry_device_spec>& devices,
                              const ry_rail_config* cfg = nullptr) {
  return create<Rail>(ry_rail_create, devices.data(), devices.size(), cfg);
}

/* A credit sender (one ledger per peer receiver). */
inline Result<CreditSender> make_credit_sender(const ry_credit_ledger_config& cfg) {
  return create<CreditSender>(ry_credit_sender_create, &cfg);
}

/* A credit receiver (the allocator granting its capacity). */
inline Result<CreditReceiver> make_credit_receiver(const ry_credit_allocator_config& cfg) {
  return create<CreditReceiver>(ry_credit_receiver_create, &cfg);
}
#endif

#if defined(RY_ENGINE)
/* A verbs engine (opens the device, starts its threads). */
inline Result<Engine> make_engine(const ry_engine_config& cfg) {
  return create<Engine>(ry_engine_create, &cfg);
}
#endif

}  // namespace ry

#endif /* RAILYARD_HPP */
